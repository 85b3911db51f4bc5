"""Image functions of paddle.vision.transforms.functional on numpy HWC arrays (uint8 or
float), as PaddlePaddle's "cv2" backend computes them, written with numpy alone:

- resize: OpenCV's INTER_LINEAR (half-pixel centres, source coordinates clamped to the
  image, no antialiasing) and INTER_NEAREST (source index floor(dst * scale)). OpenCV
  interpolates uint8 images in 11-bit fixed point; Keel in float64, rounded to nearest, so
  a uint8 pixel may differ from OpenCV's by one.
- rotate: OpenCV's getRotationMatrix2D + warpAffine (counter-clockwise degrees about the
  centre, `fill` outside), nearest or bilinear.
- grayscale: ITU-R 601 luma (0.299, 0.587, 0.114); brightness, contrast, saturation and
  hue as PaddlePaddle's cv2 functions compute them, quirks included (contrast about the
  fixed level 74, saturation's random blend weight, channels read as BGR there).

A 2-D (H, W) image is accepted where PaddlePaddle accepts one and keeps its rank."""
from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["to_tensor", "hflip", "vflip", "resize", "pad", "crop", "center_crop", "rotate", "to_grayscale",
           "normalize", "adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue"]

_INTERPOLATIONS = ("nearest", "bilinear")
_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect", "symmetric": "symmetric"}


def _image(img, what: str) -> np.ndarray:
    if not isinstance(img, np.ndarray) or img.ndim not in (2, 3):
        raise TypeError(f"{what}: expects a numpy image of shape (H, W) or (H, W, C), got "
                        f"{type(img).__name__}{'' if not isinstance(img, np.ndarray) else list(img.shape)}")
    return img


def _restore(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Float results back to the input's dtype: integer images rounded and clipped."""
    if np.issubdtype(like.dtype, np.integer):
        info = np.iinfo(like.dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(like.dtype)
    return values.astype(like.dtype)


def to_tensor(pic, data_format="CHW"):
    """An HWC (or HW) image -> a float32 keel Tensor, CHW unless data_format='HWC'; uint8
    values scaled to [0, 1].

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.full((4, 5, 3), 255, "uint8")               # HWC uint8
        >>> t = T.to_tensor(img)
        >>> t.shape, t.dtype, float(t.max())
        ([3, 4, 5], paddle.float32, 1.0)
        >>> T.to_tensor(img, data_format="HWC").shape
        [4, 5, 3]
    """
    from keel.program.tensor import Tensor
    img = _image(pic, "to_tensor")
    if data_format not in ("CHW", "HWC"):
        raise ValueError(f"to_tensor: data_format must be 'CHW' or 'HWC', got {data_format!r}")
    if img.ndim == 2:
        img = img[:, :, None]
    if data_format == "CHW":
        img = img.transpose(2, 0, 1)
    scaled = img.astype(np.float32) / 255.0 if img.dtype == np.uint8 else img.astype(np.float32)
    return Tensor(np.ascontiguousarray(scaled))


def hflip(img):
    """The image mirrored left to right.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.arange(6, dtype="uint8").reshape(2, 3, 1)
        >>> T.hflip(img)[..., 0].tolist()
        [[2, 1, 0], [5, 4, 3]]
    """
    return np.ascontiguousarray(_image(img, "hflip")[:, ::-1])


def vflip(img):
    """The image mirrored top to bottom.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.arange(6, dtype="uint8").reshape(2, 3, 1)
        >>> T.vflip(img)[..., 0].tolist()
        [[3, 4, 5], [0, 1, 2]]
    """
    return np.ascontiguousarray(_image(img, "vflip")[::-1])


def _output_size(height: int, width: int, size) -> tuple[int, int]:
    """PaddlePaddle's size rule: an int sets the shorter side (aspect kept, the longer side
    truncated), a pair is (height, width)."""
    if isinstance(size, numbers.Integral):
        if (width <= height and width == size) or (height <= width and height == size):
            return height, width
        if width < height:
            return int(size * height / width), int(size)
        return int(size), int(size * width / height)
    if len(size) != 2:
        raise ValueError(f"resize: size must be an int or (height, width), got {size!r}")
    return int(size[0]), int(size[1])


def _linear_taps(out_len: int, in_len: int):
    """OpenCV's INTER_LINEAR source positions: (dst + 0.5) * in/out - 0.5, clamped."""
    src = (np.arange(out_len, dtype=np.float64) + 0.5) * (in_len / out_len) - 0.5
    src = np.clip(src, 0, in_len - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, in_len - 1)
    return lo, hi, src - lo


def resize(img, size, interpolation="bilinear"):
    """The image resized to size: (height, width), or an int for the shorter side (the aspect ratio kept).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.zeros((40, 60, 3), "uint8")
        >>> T.resize(img, (20, 30)).shape
        (20, 30, 3)
        >>> T.resize(img, 20).shape                            # the shorter side to 20, aspect kept
        (20, 30, 3)
    """
    img = _image(img, "resize")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"resize: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}")
    h, w = img.shape[:2]
    oh, ow = _output_size(h, w, size)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"resize: output size ({oh}, {ow}) of a {h}x{w} image must be positive")
    if (oh, ow) == (h, w):
        return img.copy()
    if interpolation == "nearest":
        rows = np.minimum(np.floor(np.arange(oh) * (h / oh)).astype(np.int64), h - 1)
        cols = np.minimum(np.floor(np.arange(ow) * (w / ow)).astype(np.int64), w - 1)
        return img[rows][:, cols]
    r0, r1, fr = _linear_taps(oh, h)
    c0, c1, fc = _linear_taps(ow, w)
    x = img.astype(np.float64)
    extra = (None,) * (img.ndim - 2)
    fr, fc = fr[(slice(None), None, *extra)], fc[(None, slice(None), *extra)]
    top = x[r0][:, c0] * (1 - fc) + x[r0][:, c1] * fc
    bottom = x[r1][:, c0] * (1 - fc) + x[r1][:, c1] * fc
    return _restore(top * (1 - fr) + bottom * fr, img)


def _padding(padding) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) from an int, (left/right, top/bottom) or four ints."""
    if isinstance(padding, numbers.Integral):
        return (int(padding),) * 4
    p = [int(v) for v in padding]
    if len(p) == 2:
        return p[0], p[1], p[0], p[1]
    if len(p) == 4:
        return p[0], p[1], p[2], p[3]
    raise ValueError(f"pad: padding must be an int or 2 or 4 ints, got {padding!r}")


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad an image; modes as OpenCV's borders: 'reflect' mirrors without repeating the edge
    pixel (BORDER_REFLECT_101), 'symmetric' with it (BORDER_REFLECT); 'constant' fills with
    OpenCV's border value of `fill` (a number fills channel 0 only, see _border_value).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.array([[1, 2], [3, 4]], "uint8")[..., None]
        >>> T.pad(img, 1)[..., 0].tolist()
        [[0, 0, 0, 0], [0, 1, 2, 0], [0, 3, 4, 0], [0, 0, 0, 0]]
        >>> T.pad(img, [1, 0], padding_mode="edge")[..., 0].tolist()     # [left/right, top/bottom]
        [[1, 1, 2, 2], [3, 3, 4, 4]]
    """
    img = _image(img, "pad")
    if padding_mode not in _PAD_MODES:
        raise ValueError(f"pad: padding_mode must be one of {sorted(_PAD_MODES)}, got {padding_mode!r}")
    left, top, right, bottom = _padding(padding)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (img.ndim - 2)
    if padding_mode != "constant":
        return np.pad(img, widths, mode=_PAD_MODES[padding_mode])
    out = np.pad(img, widths, mode="constant")
    border = ~np.pad(np.ones(img.shape[:2], dtype=bool), widths[:2], mode="constant")
    out[border] = _restore(_border_value(fill, img), img)
    return out


def _border_value(fill, img) -> np.ndarray:
    """OpenCV's border value for `fill`: a number is the Scalar (fill, 0, 0, 0), so it fills
    channel 0 only of a multi-channel image (PaddlePaddle's cv2 backend passes it as it is);
    a sequence gives each channel its own."""
    channels = img.shape[2] if img.ndim == 3 else 1
    values = np.zeros(channels, dtype=np.float64)
    given = np.atleast_1d(np.asarray(fill, dtype=np.float64))[:channels]
    values[:given.size] = given
    return values if img.ndim == 3 else values[0]


def crop(img, top, left, height, width):
    """The height x width region of an HWC image whose top-left pixel is (top, left).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.arange(25, dtype="uint8").reshape(5, 5, 1)
        >>> T.crop(img, top=1, left=2, height=2, width=3)[..., 0].tolist()
        [[7, 8, 9], [12, 13, 14]]
    """
    return _image(img, "crop")[top:top + height, left:left + width].copy()


def center_crop(img, output_size):
    """The central output_size (an int for a square, or (height, width)) of an HWC image.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.arange(25, dtype="uint8").reshape(5, 5, 1)
        >>> T.center_crop(img, 3)[..., 0].tolist()
        [[6, 7, 8], [11, 12, 13], [16, 17, 18]]
    """
    img = _image(img, "center_crop")
    th, tw = (output_size, output_size) if isinstance(output_size, numbers.Integral) else output_size
    h, w = img.shape[:2]
    top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
    return crop(img, top, left, th, tw)


def rotate(img, angle, interpolation="nearest", expand=False, center=None, fill=0):
    """Rotate counter-clockwise by `angle` degrees about `center` ((x, y); (w/2, h/2) by
    default), OpenCV's matrix; `expand` grows the output to hold the whole rotated image;
    outside the source, OpenCV's border value of `fill` (see _border_value).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.zeros((2, 4, 3), "uint8")
        >>> T.rotate(img, 45).shape                  # counter-clockwise about (w/2, h/2), corners cut off
        (2, 4, 3)
        >>> T.rotate(img, 90, expand=True).shape     # grown to hold the whole rotated image
        (4, 2, 3)
    """
    img = _image(img, "rotate")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"rotate: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}")
    h, w = img.shape[:2]
    cx, cy = (w / 2.0, h / 2.0) if center is None else (float(center[0]), float(center[1]))
    a = math.radians(angle)
    alpha, beta = math.cos(a), math.sin(a)
    # OpenCV's getRotationMatrix2D: dst = M @ [x, y, 1]
    m = np.array([[alpha, beta, (1 - alpha) * cx - beta * cy],
                  [-beta, alpha, beta * cx + (1 - alpha) * cy]])
    oh, ow = h, w
    if expand:
        # PaddlePaddle's output size: the corners turned by the matrix with its sines and
        # cosines rounded to 15 places (so a quarter turn gives whole numbers)
        c, s_ = round(math.cos(-a), 15), round(math.sin(-a), 15)
        tx, ty = c * -cx + s_ * -cy + cx, -s_ * -cx + c * -cy + cy
        xs_ = [c * x + s_ * y + tx for x, y in ((0, 0), (w, 0), (w, h), (0, h))]
        ys_ = [-s_ * x + c * y + ty for x, y in ((0, 0), (w, 0), (w, h), (0, h))]
        ow = math.ceil(max(xs_)) - math.floor(min(xs_))
        oh = math.ceil(max(ys_)) - math.floor(min(ys_))
        m[0, 2] += (ow - w) * 0.5
        m[1, 2] += (oh - h) * 0.5
    inverse = np.linalg.inv(np.vstack([m, [0, 0, 1]]))[:2]
    ys, xs = np.mgrid[0:oh, 0:ow].astype(np.float64)
    sx = inverse[0, 0] * xs + inverse[0, 1] * ys + inverse[0, 2]
    sy = inverse[1, 0] * xs + inverse[1, 1] * ys + inverse[1, 2]
    x = img.astype(np.float64)
    background = _border_value(fill, img)
    if interpolation == "nearest":
        ix, iy = np.rint(sx).astype(np.int64), np.rint(sy).astype(np.int64)
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        out = np.empty((oh, ow) + img.shape[2:], dtype=np.float64)
        out[...] = background
        out[inside] = x[iy[inside], ix[inside]]
        return _restore(out, img)
    x0, y0 = np.floor(sx).astype(np.int64), np.floor(sy).astype(np.int64)
    fx, fy = sx - x0, sy - y0
    extra = (None,) * (img.ndim - 2)
    out = np.zeros((oh, ow) + img.shape[2:], dtype=np.float64)
    for dy, dx, weight in ((0, 0, (1 - fy) * (1 - fx)), (0, 1, (1 - fy) * fx), (1, 0, fy * (1 - fx)),
                           (1, 1, fy * fx)):
        px, py = x0 + dx, y0 + dy
        inside = (px >= 0) & (px < w) & (py >= 0) & (py < h)
        tap = np.empty_like(out)
        tap[...] = background
        tap[inside] = x[py[inside], px[inside]]
        out += tap * weight[(Ellipsis, *extra)]
    return _restore(out, img)


def _luma(img: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma of an RGB image, float64 (H, W)."""
    x = img.astype(np.float64)
    return 0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]


def to_grayscale(img, num_output_channels=1):
    """The luma of an RGB image (0.299 R + 0.587 G + 0.114 B), in 1 channel or repeated in 3.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.full((2, 2, 3), 100, "uint8")
        >>> T.to_grayscale(img).shape, T.to_grayscale(img, num_output_channels=3).shape
        ((2, 2, 1), (2, 2, 3))
        >>> int(T.to_grayscale(img)[0, 0, 0])
        100
    """
    img = _image(img, "to_grayscale")
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"to_grayscale: expects an RGB (H, W, 3) image, got shape {list(img.shape)}")
    if num_output_channels not in (1, 3):
        raise ValueError(f"to_grayscale: num_output_channels must be 1 or 3, got {num_output_channels}")
    gray = _restore(_luma(img), img)[:, :, None]
    return np.repeat(gray, num_output_channels, axis=2)


def normalize(img, mean, std, data_format="CHW", to_rgb=False):
    """(img - mean) / std per channel, float32; `to_rgb` reverses the channels (BGR -> RGB)
    first. Accepts a numpy image or a keel Tensor (returned as one).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.full((3, 2, 2), 0.75, "float32")            # CHW
        >>> T.normalize(img, mean=[0.5, 0.5, 0.5], std=[0.5, 0.25, 0.5])[:, 0, 0].tolist()
        [0.5, 1.0, 0.5]
        >>> T.normalize(np.full((2, 2, 3), 127.5, "float32"), [127.5] * 3, [127.5] * 3, data_format="HWC").max().item()
        0.0
    """
    from keel.program.variable import Variable
    is_tensor = isinstance(img, Variable)
    x = np.asarray(img.numpy() if is_tensor else img, dtype=np.float32)
    if data_format not in ("CHW", "HWC"):
        raise ValueError(f"normalize: data_format must be 'CHW' or 'HWC', got {data_format!r}")
    channel_axis = 0 if data_format == "CHW" else x.ndim - 1
    if to_rgb:
        x = np.flip(x, axis=channel_axis)
    shape = [1] * x.ndim
    shape[channel_axis] = -1
    mean = np.asarray(mean, dtype=np.float32).reshape(shape if np.ndim(mean) else [])
    std = np.asarray(std, dtype=np.float32).reshape(shape if np.ndim(std) else [])
    out = np.ascontiguousarray((x - mean) / std)
    if is_tensor:
        from keel.program.tensor import Tensor
        return Tensor(out)
    return out


def _table(img, value_of):
    """PaddlePaddle's cv2 lookup tables: value_of(level) for each of 256 levels, clipped to
    [0, 255] and truncated to uint8, applied to a uint8 image."""
    if img.dtype != np.uint8:
        raise TypeError(f"expects a uint8 image (PaddlePaddle's cv2 backend uses a lookup table), got {img.dtype}")
    levels = np.arange(256, dtype=np.float64)
    return np.clip(value_of(levels), 0, 255).astype(np.uint8)[img]


def adjust_brightness(img, brightness_factor):
    """Each level times brightness_factor, clipped and truncated.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.full((2, 2, 3), 100, "uint8")
        >>> T.adjust_brightness(img, 1.5)[0, 0].tolist()
        [150, 150, 150]
        >>> T.adjust_brightness(img, 3.0)[0, 0].tolist()      # clipped at 255
        [255, 255, 255]
    """
    return _table(_image(img, "adjust_brightness"), lambda v: v * brightness_factor)


def adjust_contrast(img, contrast_factor):
    """Levels stretched by contrast_factor about level 74, the fixed centre PaddlePaddle's
    cv2 backend uses (not the image's mean).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.array([[[50, 50, 50], [150, 150, 150]]], "uint8")
        >>> T.adjust_contrast(img, 2.0).tolist()
        [[[26, 26, 26], [226, 226, 226]]]
    """
    return _table(_image(img, "adjust_contrast"), lambda v: (v - 74) * contrast_factor + 74)


def adjust_saturation(img, saturation_factor):
    """A blend with the image's grey (OpenCV's BGR2GRAY weights, 0.114 for channel 0) by a
    weight PaddlePaddle's cv2 backend draws at random from
    [max(0, 1 - saturation_factor), 1 + saturation_factor], clipped and truncated."""
    img = _image(img, "adjust_saturation")
    alpha = np.random.uniform(max(0, 1 - saturation_factor), 1 + saturation_factor)
    x = img.astype(np.float32)
    gray = (0.114 * x[..., 0] + 0.587 * x[..., 1] + 0.299 * x[..., 2])[..., None]
    return (x * alpha + gray * (1 - alpha)).clip(0, 255).astype(img.dtype)


def adjust_hue(img, hue_factor):
    """The hue turned by int(hue_factor * 255) steps of 256 (OpenCV's full-range uint8 HSV
    of the image read as BGR, as PaddlePaddle's cv2 backend computes it, quantization
    included: a turn of 0 is not exactly the identity).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.zeros((1, 2, 3), "uint8")
        >>> img[..., 2] = 255                                   # pure red (BGR)
        >>> T.adjust_hue(img, 0.0).tolist() == img.tolist(), T.adjust_hue(img, 0.3).shape
        (True, (1, 2, 3))
    """
    img = _image(img, "adjust_hue")
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"adjust_hue: hue_factor must be in [-0.5, 0.5], got {hue_factor}")
    hue, saturation, value = _bgr_to_hsv_full(img.astype(np.uint8))
    hue = (hue + int(hue_factor * 255)) % 256
    # OpenCV reads the hue back in 255 steps (HSV2BGR_FULL), not the 256 it wrote
    hsv = np.stack([hue / 255.0, saturation / 255.0, value / 255.0], axis=-1)
    rgb = _hsv_to_rgb(hsv.astype(np.float32)).astype(np.float64)
    out = np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)[..., ::-1]
    return out.astype(img.dtype)


def _bgr_to_hsv_full(bgr):
    """OpenCV's uint8 BGR -> HSV_FULL, in its integer steps: hue in 256 steps and
    saturation in 255, each a 12-bit fixed-point division rounded to nearest."""
    b, g, r = (bgr[..., i].astype(np.int64) for i in range(3))
    v = np.maximum(np.maximum(r, g), b)
    diff = v - np.minimum(np.minimum(r, g), b)
    shift = 12
    sdiv = np.where(v > 0, np.rint((255 << shift) / np.maximum(v, 1)), 0).astype(np.int64)
    hdiv = np.where(diff > 0, np.rint((256 << shift) / (6.0 * np.maximum(diff, 1))), 0).astype(np.int64)
    s = (diff * sdiv + (1 << (shift - 1))) >> shift
    h = np.where(v == r, g - b, np.where(v == g, b - r + 2 * diff, r - g + 4 * diff))
    h = (h * hdiv + (1 << (shift - 1))) >> shift
    h = np.where(h < 0, h + 256, h)
    return h, s, v


def _rgb_to_hsv(rgb):
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    high, low = rgb.max(axis=-1), rgb.min(axis=-1)
    delta = high - low
    safe = np.where(delta > 0, delta, 1.0)
    hue = np.where(high == r, ((g - b) / safe) % 6, np.where(high == g, (b - r) / safe + 2, (r - g) / safe + 4))
    hue = np.where(delta > 0, hue / 6.0, 0.0)
    saturation = np.where(high > 0, delta / np.where(high > 0, high, 1.0), 0.0)
    return np.stack([hue, saturation, high], axis=-1)


def _hsv_to_rgb(hsv):
    h, s, v = hsv[..., 0] * 6.0, hsv[..., 1], hsv[..., 2]
    sector = np.floor(h).astype(np.int64) % 6
    f = h - np.floor(h)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    choices = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    channels = [np.choose(sector, [c[i] for c in choices]) for i in range(3)]
    return np.stack(channels, axis=-1)
