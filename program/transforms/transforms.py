"""paddle.vision.transforms' classes over numpy HWC images (program/transforms/functional.py
computes; these hold the arguments and draw the random parameters as PaddlePaddle's do,
from Python's `random` and numpy's global generator).

A transform takes an image, or a tuple whose leading items are named by `keys` (default
("image",)): items named "image" are transformed, the rest passed through, as
PaddlePaddle's BaseTransform does."""
from __future__ import annotations

import math
import numbers
import random

import numpy as np

from keel.program.transforms import functional as F

__all__ = ["BaseTransform", "Compose", "ToTensor", "Resize", "RandomResizedCrop", "CenterCrop", "RandomCrop",
           "RandomHorizontalFlip", "RandomVerticalFlip", "Normalize", "Transpose", "BrightnessTransform",
           "ContrastTransform", "SaturationTransform", "HueTransform", "ColorJitter", "Pad", "RandomRotation",
           "Grayscale"]


class Compose:
    """Apply each transform in turn.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> transform = T.Compose([T.Resize(64), T.CenterCrop(56), T.ToTensor(),
        ...                        T.Normalize(mean=[0.5] * 3, std=[0.5] * 3)])
        >>> x = transform(np.zeros((80, 100, 3), "uint8"))
        >>> x.shape, float(x.min())
        ([3, 56, 56], -1.0)
    """

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, data):
        for transform in self.transforms:
            data = transform(data)
        return data

    def __repr__(self):
        return "Compose(" + ", ".join(repr(t) for t in self.transforms) + ")"


class BaseTransform:
    """Subclasses give _apply_image (and may give _get_params, drawn once per call).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> class AddOne(T.BaseTransform):
        ...     def _apply_image(self, img):
        ...         return img + 1
        >>> AddOne()(np.zeros((2, 2), "float32")).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
        >>> image, label = AddOne()((np.zeros(2), 7))     # items past `keys` pass through
        >>> image.tolist(), label
        ([1.0, 1.0], 7)
    """

    def __init__(self, keys=None):
        keys = ("image",) if keys is None else keys
        if isinstance(keys, str) or not hasattr(keys, "__iter__"):
            raise ValueError(f"keys should be a sequence, but got keys={keys!r}")
        for key in keys:
            if getattr(self, f"_apply_{key}", None) is None:
                raise NotImplementedError(f"{type(self).__name__}: {key!r} is an unsupported data structure")
        self.keys = tuple(keys)
        self.params = None

    def _get_params(self, inputs):
        return None

    def __call__(self, inputs):
        items = inputs if isinstance(inputs, tuple) else (inputs,)
        self.params = self._get_params(items)
        outputs = [getattr(self, f"_apply_{key}")(item) for key, item in zip(self.keys, items)]
        outputs.extend(items[len(self.keys):])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _apply_image(self, image):
        raise NotImplementedError(f"{type(self).__name__} must define _apply_image")


class ToTensor(BaseTransform):
    """to_tensor: an HWC image to a float32 Tensor (CHW by default), uint8 values scaled to [0, 1].

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> t = T.ToTensor()(np.full((4, 5, 3), 255, "uint8"))
        >>> t.shape, t.dtype, float(t.max())
        ([3, 4, 5], paddle.float32, 1.0)
    """

    def __init__(self, data_format="CHW", keys=None):
        super().__init__(keys)
        self.data_format = data_format

    def _apply_image(self, img):
        return F.to_tensor(img, self.data_format)


class Resize(BaseTransform):
    """resize to size: (height, width), or an int for the shorter side (the aspect ratio kept).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.zeros((100, 200, 3), "uint8")
        >>> T.Resize(50)(img).shape, T.Resize((64, 64))(img).shape
        ((50, 100, 3), (64, 64, 3))
    """

    def __init__(self, size, interpolation="bilinear", keys=None):
        super().__init__(keys)
        if not (isinstance(size, numbers.Integral) or (hasattr(size, "__len__") and len(size) == 2)):
            raise ValueError(f"Resize: size must be an int or (height, width), got {size!r}")
        self.size, self.interpolation = size, interpolation

    def _apply_image(self, img):
        return F.resize(img, self.size, self.interpolation)


def _pair(size):
    return (int(size), int(size)) if isinstance(size, numbers.Number) else tuple(int(s) for s in size)


class RandomResizedCrop(BaseTransform):
    """A crop of random area (scale of the image's) and aspect ratio (log-uniform in
    `ratio`), resized to `size`; after 10 failed draws, the central crop of the nearest
    allowed ratio.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> T.RandomResizedCrop(224)(np.zeros((300, 400, 3), "uint8")).shape
        (224, 224, 3)
        >>> T.RandomResizedCrop((64, 32), scale=(0.5, 1.0))(np.zeros((100, 100, 3), "uint8")).shape
        (64, 32, 3)
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4, 4.0 / 3), interpolation="bilinear", keys=None):
        super().__init__(keys)
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError(f"RandomResizedCrop: scale and ratio must be (min, max), got {scale}, {ratio}")
        self.size, self.scale, self.ratio, self.interpolation = _pair(size), scale, ratio, interpolation

    def _crop_box(self, height, width, attempts=10):
        area = height * width
        log_ratio = tuple(math.log(x) for x in self.ratio)
        for _ in range(attempts):
            target_area = np.random.uniform(*self.scale) * area
            aspect = math.exp(np.random.uniform(*log_ratio))
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return random.randint(0, height - h), random.randint(0, width - w), h, w
        in_ratio = width / height
        if in_ratio < min(self.ratio):
            w, h = width, int(round(width / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            h, w = height, int(round(height * max(self.ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def _apply_image(self, img):
        top, left, h, w = self._crop_box(*img.shape[:2])
        return F.resize(F.crop(img, top, left, h, w), self.size, self.interpolation)


class CenterCrop(BaseTransform):
    """center_crop to size (an int for a square, or (height, width)).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> T.CenterCrop(224)(np.zeros((256, 300, 3), "uint8")).shape
        (224, 224, 3)
        >>> T.CenterCrop((100, 50))(np.zeros((256, 300, 3), "uint8")).shape
        (100, 50, 3)
    """

    def __init__(self, size, keys=None):
        super().__init__(keys)
        self.size = _pair(size)

    def _apply_image(self, img):
        return F.center_crop(img, self.size)


class RandomCrop(BaseTransform):
    """A crop of `size` at a random place, after optional padding (`pad_if_needed` pads a
    smaller image up to the size).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> T.RandomCrop(224)(np.zeros((256, 256, 3), "uint8")).shape
        (224, 224, 3)
        >>> T.RandomCrop(32, padding=4)(np.zeros((32, 32, 3), "uint8")).shape    # CIFAR-style: pad, then crop
        (32, 32, 3)
    """

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant", keys=None):
        super().__init__(keys)
        self.size, self.padding, self.pad_if_needed = _pair(size), padding, pad_if_needed
        self.fill, self.padding_mode = fill, padding_mode

    def _apply_image(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        h, w = img.shape[:2]
        th, tw = self.size
        if self.pad_if_needed and w < tw:
            img = F.pad(img, (tw - w, 0), self.fill, self.padding_mode)
        if self.pad_if_needed and h < th:
            img = F.pad(img, (0, th - h), self.fill, self.padding_mode)
        h, w = img.shape[:2]
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: a {th}x{tw} crop of a {h}x{w} image; give pad_if_needed=True")
        top = random.randint(0, h - th) if h > th else 0
        left = random.randint(0, w - tw) if w > tw else 0
        return F.crop(img, top, left, th, tw)


class RandomHorizontalFlip(BaseTransform):
    """hflip with probability prob.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.arange(6, dtype="uint8").reshape(2, 3, 1)
        >>> T.RandomHorizontalFlip(prob=1.0)(img)[..., 0].tolist()
        [[2, 1, 0], [5, 4, 3]]
        >>> T.RandomHorizontalFlip(prob=0.0)(img)[..., 0].tolist()
        [[0, 1, 2], [3, 4, 5]]
    """

    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0 <= prob <= 1:
            raise ValueError(f"RandomHorizontalFlip: prob must be in [0, 1], got {prob}")
        self.prob = prob

    def _apply_image(self, img):
        return F.hflip(img) if random.random() < self.prob else img


class RandomVerticalFlip(BaseTransform):
    """vflip with probability prob.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.arange(6, dtype="uint8").reshape(2, 3, 1)
        >>> T.RandomVerticalFlip(prob=1.0)(img)[..., 0].tolist()
        [[3, 4, 5], [0, 1, 2]]
    """

    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0 <= prob <= 1:
            raise ValueError(f"RandomVerticalFlip: prob must be in [0, 1], got {prob}")
        self.prob = prob

    def _apply_image(self, img):
        return F.vflip(img) if random.random() < self.prob else img


class Normalize(BaseTransform):
    """normalize: (img - mean) / std per channel, of a CHW or HWC image.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> normalize = T.Normalize(mean=[127.5, 127.5, 127.5], std=[127.5, 127.5, 127.5], data_format="HWC")
        >>> out = normalize(np.full((2, 2, 3), 255, "uint8"))
        >>> out.dtype, out[0, 0].tolist()
        (dtype('float32'), [1.0, 1.0, 1.0])
    """

    def __init__(self, mean=0.0, std=1.0, data_format="CHW", to_rgb=False, keys=None):
        super().__init__(keys)
        self.mean = [mean] * 3 if isinstance(mean, numbers.Number) else mean
        self.std = [std] * 3 if isinstance(std, numbers.Number) else std
        self.data_format, self.to_rgb = data_format, to_rgb

    def _apply_image(self, img):
        return F.normalize(img, self.mean, self.std, self.data_format, self.to_rgb)


class Transpose(BaseTransform):
    """Reorder the dims (HWC -> CHW by default); a 2-D image gains a channel dim first.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> T.Transpose()(np.zeros((32, 24, 3), "uint8")).shape
        (3, 32, 24)
        >>> T.Transpose((1, 0, 2))(np.zeros((32, 24, 3), "uint8")).shape
        (24, 32, 3)
    """

    def __init__(self, order=(2, 0, 1), keys=None):
        super().__init__(keys)
        self.order = tuple(order)

    def _apply_image(self, img):
        from keel.program.variable import Variable
        if isinstance(img, Variable):
            from keel.program.layers.tensor import transpose
            return transpose(img, list(self.order))
        img = np.asarray(img)
        if img.ndim == 2:
            img = img[..., None]
        return img.transpose(self.order)


def _factor_range(value, name, center=1.0, bound=(0, float("inf")), clip_first=True):
    """PaddlePaddle's _check_input: a number v -> [center - v, center + v] (its low end at
    least 0 for the multiplicative factors); 0 -> None (the transform does nothing)."""
    if not isinstance(value, numbers.Number) or value < 0:
        raise ValueError(f"{name}: the value must be a non-negative number, got {value!r}")
    low = max(center - value, 0) if clip_first else center - value
    high = center + value
    if not bound[0] <= low <= high <= bound[1]:
        raise ValueError(f"{name}: values should be between {bound}, got [{low}, {high}]")
    return None if low == high == center else (low, high)


class BrightnessTransform(BaseTransform):
    """adjust_brightness by a factor drawn uniformly from [1 - value, 1 + value] on each call.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.full((8, 8, 3), 100, "uint8")
        >>> out = T.BrightnessTransform(0.4)(img)                # a factor drawn from [0.6, 1.4]
        >>> out.shape, 60 <= int(out[0, 0, 0]) <= 140
        ((8, 8, 3), True)
    """

    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "brightness")

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_brightness(img, random.uniform(*self.value))


class ContrastTransform(BaseTransform):
    """adjust_contrast by a factor drawn uniformly from [1 - value, 1 + value] on each call.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.random.randint(0, 256, (8, 8, 3)).astype("uint8")
        >>> out = T.ContrastTransform(0.4)(img)        # a factor drawn from [0.6, 1.4]
        >>> out.shape, out.dtype
        ((8, 8, 3), dtype('uint8'))
    """

    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "contrast")

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_contrast(img, random.uniform(*self.value))


class SaturationTransform(BaseTransform):
    """adjust_saturation by a factor drawn uniformly from [1 - value, 1 + value] on each call.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.zeros((4, 4, 3), "uint8")
        >>> img[..., 0] = 200                                  # one saturated colour
        >>> out = T.SaturationTransform(0.4)(img)              # a factor drawn from [0.6, 1.4]
        >>> out.shape, out.dtype
        ((4, 4, 3), dtype('uint8'))
    """

    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "saturation")

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_saturation(img, random.uniform(*self.value))


class HueTransform(BaseTransform):
    """adjust_hue by a factor drawn uniformly from [-value, value] on each call (value <= 0.5).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.random.randint(0, 256, (8, 8, 3)).astype("uint8")
        >>> out = T.HueTransform(0.2)(img)             # hue_factor drawn from [-0.2, 0.2]
        >>> out.shape, out.dtype
        ((8, 8, 3), dtype('uint8'))
    """

    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "hue", center=0, bound=(-0.5, 0.5), clip_first=False)

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_hue(img, random.uniform(*self.value))


class ColorJitter(BaseTransform):
    """Brightness, contrast, saturation and hue changes in a random order.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> jitter = T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
        >>> out = jitter(np.random.randint(0, 256, (32, 32, 3)).astype("uint8"))
        >>> out.shape, out.dtype
        ((32, 32, 3), dtype('uint8'))
    """

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0, keys=None):
        super().__init__(keys)
        self.brightness, self.contrast, self.saturation, self.hue = brightness, contrast, saturation, hue

    def _apply_image(self, img):
        steps = [BrightnessTransform(self.brightness, self.keys), ContrastTransform(self.contrast, self.keys),
                 SaturationTransform(self.saturation, self.keys), HueTransform(self.hue, self.keys)]
        random.shuffle(steps)
        return Compose(steps)(img)


class Pad(BaseTransform):
    """pad by padding: one int for every side, [left/right, top/bottom] or [left, top, right, bottom].

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.zeros((32, 32, 3), "uint8")
        >>> T.Pad(2)(img).shape, T.Pad([1, 2])(img).shape, T.Pad([1, 2, 3, 4], padding_mode="reflect")(img).shape
        ((36, 36, 3), (36, 34, 3), (38, 36, 3))
    """

    def __init__(self, padding, fill=0, padding_mode="constant", keys=None):
        super().__init__(keys)
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"Pad: padding_mode must be constant, edge, reflect or symmetric, got {padding_mode!r}")
        if isinstance(padding, (list, tuple)) and len(padding) not in (2, 4):
            raise ValueError(f"Pad: padding must be an int or a 2 or 4 element tuple, got {padding!r}")
        self.padding = tuple(padding) if isinstance(padding, list) else padding
        self.fill = tuple(fill) if isinstance(fill, list) else fill
        self.padding_mode = padding_mode

    def _apply_image(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)


class RandomRotation(BaseTransform):
    """rotate by an angle drawn uniformly from [-degrees, degrees] (or from the (min, max) given).

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> T.RandomRotation(30)(np.zeros((32, 32, 3), "uint8")).shape         # an angle from [-30, 30]
        (32, 32, 3)
        >>> T.RandomRotation((90, 90), expand=True)(np.zeros((20, 40, 3), "uint8")).shape
        (40, 20, 3)
    """

    def __init__(self, degrees, interpolation="nearest", expand=False, center=None, fill=0, keys=None):
        if isinstance(degrees, numbers.Number):
            if degrees < 0:
                raise ValueError("RandomRotation: if degrees is a single number, it must be positive")
            degrees = (-degrees, degrees)
        elif len(degrees) != 2:
            raise ValueError("RandomRotation: if degrees is a sequence, it must be of len 2")
        super().__init__(keys)
        self.degrees, self.interpolation, self.expand = tuple(degrees), interpolation, expand
        self.center, self.fill = center, fill

    def _apply_image(self, img):
        angle = random.uniform(*self.degrees)
        return F.rotate(img, angle, self.interpolation, self.expand, self.center, self.fill)


class Grayscale(BaseTransform):
    """to_grayscale, with 1 or 3 output channels.

    Examples:
        >>> import numpy as np
        >>> import keel.vision.transforms as T
        >>> img = np.full((4, 4, 3), 100, "uint8")
        >>> T.Grayscale()(img).shape, T.Grayscale(num_output_channels=3)(img).shape
        ((4, 4, 1), (4, 4, 3))
    """

    def __init__(self, num_output_channels=1, keys=None):
        super().__init__(keys)
        self.num_output_channels = num_output_channels

    def _apply_image(self, img):
        return F.to_grayscale(img, self.num_output_channels)
