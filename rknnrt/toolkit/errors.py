"""The converter's error: raised where a problem is found, reported by RKNN's methods."""


class ConversionError(Exception):
    """The model or the configuration cannot be converted; the message says what to change."""
