"""The replayed demos show their results in a window; on a machine without a display OpenCV's
GUI calls fail, so they do nothing here (the results are still printed and saved)."""

try:
    import cv2
except ImportError:  # the Pillow stand-in is used instead (no_cv2/)
    cv2 = None

if cv2 is not None:

    def _no_window(*args: object, **kwargs: object) -> None:
        return None

    def _no_key(*args: object, **kwargs: object) -> int:
        return -1  # "no key pressed", as waitKey returns on timeout

    for _name in ("imshow", "namedWindow", "destroyAllWindows", "destroyWindow"):
        setattr(cv2, _name, _no_window)
    for _name in ("waitKey", "waitKeyEx"):
        setattr(cv2, _name, _no_key)
