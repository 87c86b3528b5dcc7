"""One module per command: parse options, call the engine, hand records to render.

Modules import the engine inside the command function so ``rmqstore --help`` stays light.
"""
