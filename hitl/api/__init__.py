"""The HTTP side of the product, served by `python starter.py serve`."""
