"""The one error type of the model package (its own module so that every reader can raise it)."""


class ModelFormatError(ValueError):
    """The bytes are not a readable rknnrt model; the message says what is wrong."""
