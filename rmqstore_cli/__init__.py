"""rmqstore: read, write, verify and repair Apache RocketMQ broker store directories offline."""

__version__ = "0.1.0"
