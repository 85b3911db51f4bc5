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
    """Apply each transform in turn."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, data):
        for transform in self.transforms:
            data = transform(data)
        return data

    def __repr__(self):
        return "Compose(" + ", ".join(repr(t) for t in self.transforms) + ")"


class BaseTransform:
    """Subclasses give _apply_image (and may give _get_params, drawn once per call)."""

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
    def __init__(self, data_format="CHW", keys=None):
        super().__init__(keys)
        self.data_format = data_format

    def _apply_image(self, img):
        return F.to_tensor(img, self.data_format)


class Resize(BaseTransform):
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
    allowed ratio."""

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
    def __init__(self, size, keys=None):
        super().__init__(keys)
        self.size = _pair(size)

    def _apply_image(self, img):
        return F.center_crop(img, self.size)


class RandomCrop(BaseTransform):
    """A crop of `size` at a random place, after optional padding (`pad_if_needed` pads a
    smaller image up to the size)."""

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
    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0 <= prob <= 1:
            raise ValueError(f"RandomHorizontalFlip: prob must be in [0, 1], got {prob}")
        self.prob = prob

    def _apply_image(self, img):
        return F.hflip(img) if random.random() < self.prob else img


class RandomVerticalFlip(BaseTransform):
    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0 <= prob <= 1:
            raise ValueError(f"RandomVerticalFlip: prob must be in [0, 1], got {prob}")
        self.prob = prob

    def _apply_image(self, img):
        return F.vflip(img) if random.random() < self.prob else img


class Normalize(BaseTransform):
    def __init__(self, mean=0.0, std=1.0, data_format="CHW", to_rgb=False, keys=None):
        super().__init__(keys)
        self.mean = [mean] * 3 if isinstance(mean, numbers.Number) else mean
        self.std = [std] * 3 if isinstance(std, numbers.Number) else std
        self.data_format, self.to_rgb = data_format, to_rgb

    def _apply_image(self, img):
        return F.normalize(img, self.mean, self.std, self.data_format, self.to_rgb)


class Transpose(BaseTransform):
    """Reorder the dims (HWC -> CHW by default); a 2-D image gains a channel dim first."""

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
    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "brightness")

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_brightness(img, random.uniform(*self.value))


class ContrastTransform(BaseTransform):
    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "contrast")

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_contrast(img, random.uniform(*self.value))


class SaturationTransform(BaseTransform):
    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "saturation")

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_saturation(img, random.uniform(*self.value))


class HueTransform(BaseTransform):
    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _factor_range(value, "hue", center=0, bound=(-0.5, 0.5), clip_first=False)

    def _apply_image(self, img):
        return img if self.value is None else F.adjust_hue(img, random.uniform(*self.value))


class ColorJitter(BaseTransform):
    """Brightness, contrast, saturation and hue changes in a random order."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0, keys=None):
        super().__init__(keys)
        self.brightness, self.contrast, self.saturation, self.hue = brightness, contrast, saturation, hue

    def _apply_image(self, img):
        steps = [BrightnessTransform(self.brightness, self.keys), ContrastTransform(self.contrast, self.keys),
                 SaturationTransform(self.saturation, self.keys), HueTransform(self.hue, self.keys)]
        random.shuffle(steps)
        return Compose(steps)(img)


class Pad(BaseTransform):
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
    def __init__(self, num_output_channels=1, keys=None):
        super().__init__(keys)
        self.num_output_channels = num_output_channels

    def _apply_image(self, img):
        return F.to_grayscale(img, self.num_output_channels)
