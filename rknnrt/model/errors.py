"""The error types of the model package (their own module so that every reader, rknnrt's
container and the vendor reader alike, can raise them without importing one another)."""


class ModelFormatError(ValueError):
    """The bytes are not a readable rknnrt model; the message says what is wrong."""


class VendorFormatError(ModelFormatError):
    """A vendor .rknn file that cannot be read (malformed, or a part rknnrt cannot decode)."""
