"""What the bytes are: every on-disk record declared once, as a construct struct."""
