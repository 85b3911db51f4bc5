"""keel.vision.transforms on numpy HWC images: the functions against per-pixel Python
references of OpenCV's rules (what PaddlePaddle's cv2 backend calls), the classes' random
parameters and argument checks; with PaddlePaddle and OpenCV installed, against
paddle.vision.transforms on the same numpy images."""
import math
import random

import numpy as np
import pytest

import keel as paddle
from keel.vision import transforms as T
from keel.vision.transforms import functional as F

_RNG = np.random.default_rng(7)


def _image(h=9, w=11, c=3, dtype=np.uint8):
    if dtype == np.uint8:
        return _RNG.integers(0, 256, (h, w, c)).astype(np.uint8)
    return _RNG.uniform(0, 1, (h, w, c)).astype(dtype)


def _bilinear_reference(img, oh, ow):
    """OpenCV INTER_LINEAR, one output pixel at a time."""
    h, w = img.shape[:2]
    out = np.zeros((oh, ow) + img.shape[2:])
    for i in range(oh):
        sy = min(max((i + 0.5) * h / oh - 0.5, 0.0), h - 1)
        y0 = int(math.floor(sy))
        y1, fy = min(y0 + 1, h - 1), sy - y0
        for j in range(ow):
            sx = min(max((j + 0.5) * w / ow - 0.5, 0.0), w - 1)
            x0 = int(math.floor(sx))
            x1, fx = min(x0 + 1, w - 1), sx - x0
            out[i, j] = ((1 - fy) * ((1 - fx) * img[y0, x0] + fx * img[y0, x1])
                         + fy * ((1 - fx) * img[y1, x0] + fx * img[y1, x1]))
    return out


@pytest.mark.parametrize("size", [(5, 7), (18, 4), (9, 11)])
def test_resize_bilinear_matches_the_per_pixel_rule(size):
    img = _image(dtype=np.float64)
    got = F.resize(img, size)
    assert got.shape == (*size, 3) and got.dtype == np.float64
    np.testing.assert_allclose(got, _bilinear_reference(img, *size), rtol=1e-12, atol=1e-12)
    u8 = _image()
    np.testing.assert_array_equal(F.resize(u8, size), np.clip(np.rint(_bilinear_reference(u8, *size)), 0, 255))


def test_resize_nearest_and_the_shorter_side_rule():
    img = _image(6, 10)
    got = F.resize(img, (3, 4), "nearest")
    rows, cols = [math.floor(i * 6 / 3) for i in range(3)], [math.floor(j * 10 / 4) for j in range(4)]
    np.testing.assert_array_equal(got, img[rows][:, cols])
    assert F.resize(img, 3).shape == (3, 5, 3)          # shorter side 3, the other int(3 * 10 / 6)
    assert F.resize(_image(10, 6), 4).shape == (6, 4, 3)
    assert F.resize(img, 6) .shape == (6, 10, 3)        # already that size
    assert F.resize(img[:, :, :1], (4, 4)).shape == (4, 4, 1)
    assert F.resize(img[:, :, 0], (4, 4)).shape == (4, 4)
    with pytest.raises(ValueError, match="interpolation"):
        F.resize(img, 4, "bicubic-ish")


def test_pad_modes():
    img = np.arange(12, dtype=np.uint8).reshape(3, 4, 1)
    left, top, right, bottom = 2, 1, 1, 2
    got = F.pad(img, (left, top, right, bottom), fill=9)
    assert got.shape == (3 + top + bottom, 4 + left + right, 1)
    assert (got[:top] == 9).all() and (got[:, :left] == 9).all()
    np.testing.assert_array_equal(got[top:top + 3, left:left + 4], img)
    row = np.arange(4, dtype=np.uint8).reshape(1, 4)
    assert F.pad(row, (2, 0), padding_mode="reflect")[0].tolist() == [2, 1, 0, 1, 2, 3, 2, 1]     # BORDER_REFLECT_101
    assert F.pad(row, (2, 0), padding_mode="symmetric")[0].tolist() == [1, 0, 0, 1, 2, 3, 3, 2]   # BORDER_REFLECT
    assert F.pad(row, (2, 0), padding_mode="edge")[0].tolist() == [0, 0, 0, 1, 2, 3, 3, 3]
    rgb = F.pad(_image(2, 2), 1, fill=(1, 2, 3))
    assert rgb[0, 0].tolist() == [1, 2, 3]
    # a number is OpenCV's Scalar(fill): channel 0 only, as PaddlePaddle's cv2 backend pads
    assert F.pad(_image(2, 2), 1, fill=5)[0, 0].tolist() == [5, 0, 0]


def test_crops_flips_and_layout():
    img = _image(8, 10)
    np.testing.assert_array_equal(F.center_crop(img, (4, 5)), img[2:6, 2:7])
    np.testing.assert_array_equal(F.center_crop(img, 3), img[2:5, 4:7])    # round((8-3)/2)=2, round(3.5)=4
    np.testing.assert_array_equal(F.hflip(img), img[:, ::-1])
    np.testing.assert_array_equal(F.vflip(img), img[::-1])
    assert T.Transpose()(img).shape == (3, 8, 10)
    assert T.Transpose()(img[:, :, 0]).shape == (1, 8, 10)
    tensor = T.ToTensor()(img)
    assert tensor.dtype == paddle.float32 and tensor.shape == [3, 8, 10]
    np.testing.assert_allclose(tensor.numpy(), img.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    assert T.ToTensor("HWC")(img).shape == [8, 10, 3]


def test_normalize():
    chw = _image(4, 5).transpose(2, 0, 1).astype(np.float32)
    got = T.Normalize(mean=[1.0, 2.0, 3.0], std=[2.0, 4.0, 8.0])(chw)
    np.testing.assert_allclose(got, (chw - np.array([1, 2, 3]).reshape(3, 1, 1)) / np.array([2, 4, 8]).reshape(3, 1, 1))
    hwc = _image(4, 5).astype(np.float32)
    got = T.Normalize(127.5, 127.5, data_format="HWC", to_rgb=True)(hwc)
    np.testing.assert_allclose(got, (hwc[:, :, ::-1] - 127.5) / 127.5)
    as_tensor = T.Normalize(0.5, 0.5)(paddle.to_tensor(chw))
    np.testing.assert_allclose(as_tensor.numpy(), (chw - 0.5) / 0.5)


def test_rotate_quarter_turns_and_expand():
    img = _image(5, 5)
    # about the centre (2.5, 2.5): a quarter turn counter-clockwise maps pixel (y, x) from (x, 4 - y) ...
    got = F.rotate(img, 90)
    ys, xs = np.mgrid[0:5, 0:5]
    # OpenCV's centre (w/2, h/2) puts pixel centres half a pixel off the axis; nearest rounds
    # the source coordinate x' = y + 0, y' = 5 - x - ... checked against the matrix itself:
    a = math.radians(90)
    m = np.array([[math.cos(a), math.sin(a), (1 - math.cos(a)) * 2.5 - math.sin(a) * 2.5],
                  [-math.sin(a), math.cos(a), math.sin(a) * 2.5 + (1 - math.cos(a)) * 2.5]])
    inv = np.linalg.inv(np.vstack([m, [0, 0, 1]]))
    sx = np.rint(inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]).astype(int)
    sy = np.rint(inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]).astype(int)
    inside = (sx >= 0) & (sx < 5) & (sy >= 0) & (sy < 5)
    np.testing.assert_array_equal(got[inside], img[sy[inside], sx[inside]])
    assert (got[~inside] == 0).all()
    assert F.rotate(_image(4, 8), 90, expand=True).shape == (8, 4, 3)
    np.testing.assert_array_equal(F.rotate(img, 0, "bilinear"), img)


def test_color_functions():
    img = _image(6, 7)
    np.testing.assert_array_equal(F.adjust_brightness(img, 1.7), np.clip(img * 1.7, 0, 255).astype(np.uint8))
    np.testing.assert_array_equal(F.adjust_contrast(img, 0.5),
                                  np.clip((img.astype(float) - 74) * 0.5 + 74, 0, 255).astype(np.uint8))
    assert np.abs(F.adjust_hue(img, 0.0).astype(int) - img).max() <= 8    # uint8 HSV steps lose a little
    gray = F.to_grayscale(img)
    want = np.rint(0.299 * img[..., 0] + 0.587 * img[..., 1] + 0.114 * img[..., 2])
    np.testing.assert_array_equal(gray[..., 0], want)
    assert F.to_grayscale(img, 3).shape == (6, 7, 3)
    np.random.seed(3)
    alpha = np.random.uniform(0.5, 1.5)
    np.random.seed(3)
    sat = F.adjust_saturation(img, 0.5)
    x = img.astype(np.float32)
    g = (0.114 * x[..., 0] + 0.587 * x[..., 1] + 0.299 * x[..., 2])[..., None]
    np.testing.assert_array_equal(sat, (x * alpha + g * (1 - alpha)).clip(0, 255).astype(np.uint8))
    with pytest.raises(ValueError, match="hue_factor"):
        F.adjust_hue(img, 0.7)


def test_hue_is_a_rotation_of_the_colour_wheel():
    pure = np.array([[[0, 0, 255], [0, 255, 0], [255, 0, 0]]], np.uint8)      # BGR: red, green, blue
    # a third of a turn (int(0.333 * 255) = 84 of 256 steps, about 118 degrees): red -> green -> blue
    turned = F.adjust_hue(pure, 1 / 3)
    assert np.argmax(turned[0], axis=1).tolist() == [1, 0, 2]


def test_random_transforms_draw_as_paddles():
    img = _image(20, 30)
    random.seed(0)
    np.random.seed(0)
    out = T.RandomResizedCrop(8)(img)
    assert out.shape == (8, 8, 3)
    assert T.RandomHorizontalFlip(1.0)(img).tolist() == img[:, ::-1].tolist()
    assert T.RandomHorizontalFlip(0.0)(img) is img
    assert T.RandomCrop(12)(img).shape == (12, 12, 3)
    assert T.RandomCrop(25, pad_if_needed=True)(img).shape == (25, 25, 3)
    assert T.RandomRotation(30)(img).shape == img.shape
    assert T.ColorJitter(0.4, 0.4, 0.4, 0.1)(img).shape == img.shape
    assert T.ColorJitter()(img) is img
    pipeline = T.Compose([T.Resize(16), T.CenterCrop(14), T.ToTensor(), T.Normalize(0.5, 0.5)])
    assert pipeline(img).shape == [3, 14, 14]
    # a (image, label) tuple: the image transformed, the label passed through
    image, label = T.Resize((4, 4))((img, 3))
    assert image.shape == (4, 4, 3) and label == 3


def test_argument_checks():
    with pytest.raises(ValueError, match="padding_mode"):
        T.Pad(2, padding_mode="wrap")
    with pytest.raises(ValueError, match="must be positive"):
        T.RandomRotation(-3)
    with pytest.raises(ValueError, match="brightness"):
        T.BrightnessTransform(-1)
    with pytest.raises(NotImplementedError, match="'boxes'"):
        T.Resize(4, keys=("image", "boxes"))
    with pytest.raises(TypeError, match="numpy image"):
        F.hflip([[1, 2]])


# -- PaddlePaddle's cv2 backend as the oracle ----------------------------------------------------

@pytest.fixture
def paddle_f():
    pytest.importorskip("cv2")
    P = pytest.importorskip("paddle")
    return P.vision.transforms.functional


@pytest.mark.paddle
@pytest.mark.parametrize("size, interpolation", [((5, 7), "bilinear"), ((20, 13), "bilinear"), (6, "bilinear"),
                                                 ((5, 7), "nearest"), ((20, 13), "nearest")])
def test_resize_equals_paddle(paddle_f, size, interpolation):
    img = _image(12, 15)
    got, want = F.resize(img, size, interpolation), paddle_f.resize(img, size, interpolation)
    assert got.shape == want.shape
    # OpenCV interpolates uint8 in 11-bit fixed point: at most one level apart
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    f32 = _image(12, 15, dtype=np.float32)
    np.testing.assert_allclose(F.resize(f32, size, interpolation), paddle_f.resize(f32, size, interpolation),
                               atol=1e-5)


@pytest.mark.paddle
def test_pad_crop_flip_equal_paddle(paddle_f):
    img = _image(7, 9)
    for mode in ("constant", "edge", "reflect", "symmetric"):
        np.testing.assert_array_equal(F.pad(img, (2, 1, 3, 4), 5, mode), paddle_f.pad(img, (2, 1, 3, 4), 5, mode))
    np.testing.assert_array_equal(F.center_crop(img, (4, 6)), paddle_f.center_crop(img, (4, 6)))
    np.testing.assert_array_equal(F.hflip(img), paddle_f.hflip(img))
    np.testing.assert_array_equal(F.vflip(img), paddle_f.vflip(img))


@pytest.mark.paddle
@pytest.mark.parametrize("angle, interpolation, expand", [(30, "nearest", False), (-45, "bilinear", False),
                                                          (90, "nearest", True), (17, "bilinear", True)])
def test_rotate_equals_paddle(paddle_f, angle, interpolation, expand):
    img = _image(10, 14)
    got = F.rotate(img, angle, interpolation, expand, fill=7)
    want = paddle_f.rotate(img, angle, interpolation, expand, fill=7)
    assert got.shape == want.shape
    diff = np.abs(got.astype(int) - want.astype(int))
    # fixed-point coordinates: a pixel on a rounding edge may take its neighbour
    assert (diff <= 1).mean() > 0.95


@pytest.mark.paddle
def test_colour_functions_equal_paddle(paddle_f):
    img = _image(8, 9)
    np.testing.assert_array_equal(F.adjust_brightness(img, 1.3), paddle_f.adjust_brightness(img, 1.3))
    np.testing.assert_array_equal(F.adjust_contrast(img, 0.6), paddle_f.adjust_contrast(img, 0.6))
    np.random.seed(11)
    ours = F.adjust_saturation(img, 0.4)
    np.random.seed(11)
    theirs = paddle_f.adjust_saturation(img, 0.4)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    assert np.abs(F.to_grayscale(img).astype(int) - paddle_f.to_grayscale(img).astype(int)).max() <= 1
    for hue in (0.1, -0.3, 0.5):
        diff = np.abs(F.adjust_hue(img, hue).astype(int) - paddle_f.adjust_hue(img, hue).astype(int))
        assert diff.max() <= 1 and diff.mean() < 1e-3     # OpenCV's float32 rounding now and then
