"""A cv2 stand-in over Pillow for hosts without OpenCV: the calls the toolkit2 examples and the
zoo's yolov5/resnet/mobilenet demos make (drawing calls draw nothing)."""

import numpy as np
from PIL import Image

COLOR_BGR2RGB = COLOR_RGB2BGR = 4
IMREAD_GRAYSCALE, IMREAD_COLOR, FONT_HERSHEY_SIMPLEX, INTER_LINEAR = 0, 1, 0, 1
INTER_AREA, LINE_AA, BORDER_CONSTANT = 3, 16, 0


def imread(path: str, flag: int = 1) -> np.ndarray | None:
    try:
        im = Image.open(path)
    except OSError:
        return None
    if flag == 0:
        return np.asarray(im.convert("L"))
    return np.ascontiguousarray(np.asarray(im.convert("RGB"))[..., ::-1])


def cvtColor(img: np.ndarray, code: int) -> np.ndarray:
    return np.ascontiguousarray(img[..., ::-1])


def resize(img: np.ndarray, size: tuple, interpolation: int | None = None) -> np.ndarray:
    mode = "L" if img.ndim == 2 else "RGB"
    return np.asarray(Image.fromarray(img, mode).resize(tuple(size), Image.BILINEAR))


def imwrite(path: str, img: np.ndarray) -> bool:
    Image.fromarray(np.ascontiguousarray(img[..., ::-1]) if img.ndim == 3 else img).save(path)
    return True


def copyMakeBorder(img: np.ndarray, top: int, bottom: int, left: int, right: int,
                   border_type: int, value: object = None) -> np.ndarray:  # fmt: skip
    return np.pad(img, ((top, bottom), (left, right), (0, 0)), constant_values=114)


def _draws_nothing(img: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
    return img


rectangle = putText = circle = line = polylines = _draws_nothing


def imshow(*args: object) -> None:
    return None


def waitKey(*args: object) -> int:
    return -1
