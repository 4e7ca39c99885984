"""The shared bottom of every layer: the error codes, the record-batch format, JSON Lines
files and process lifetime. It imports nothing else of isrlab."""
