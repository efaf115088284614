"""The Large Batch Simulation recipe's components: the SE-ResNet9 (Fixup) encoder, LAMB, and the
learning rate's square-root scaling, warm-up and cosine schedule."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from vecfast.trainers.algorithm.models import ActorCritic, ConvEncoder, is_image
from vecfast.trainers.algorithm.optimizers import Lamb, make_optimizer
from vecfast.trainers.algorithm.schedules import learning_rate
from vecfast.trainers.algorithm.se_resnet import WIDTHS, FixupBasicBlock, SpaceToDepth
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.registry import resolve
from vecfast.trainers.run.defaults import ConfigLayers

NORM_LAYERS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm, nn.LocalResponseNorm)


@pytest.fixture(autouse=True)
def one_thread() -> None:
    torch.set_num_threads(1)


def se_config(**overrides: object) -> TrainConfig:
    base = {
        "encoder_conv_architecture": "se_resnet9",
        "encoder_conv_mlp_layers": (32,),
        "encoder_bf16": False,
        "rnn_size": 16,
        "rollout": 4,
        "batch_size": 8,
    }
    return TrainConfig.from_overrides(**{**base, **overrides})


def images(shape: tuple[int, ...], dtype: type, batch: int = 2, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == np.uint8:
        return torch.randint(0, 256, (batch, *shape), dtype=torch.uint8, generator=g)
    return torch.rand((batch, *shape), generator=g) * 10.0  # depth in metres


def blocks(encoder: ConvEncoder) -> list[FixupBasicBlock]:
    return [m for m in encoder.rest if isinstance(m, FixupBasicBlock)]


# ----------------------------------------------------------------------------------------- encoder
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((64, 64, 1), np.float32), ((1, 64, 64), np.float32), ((64, 64, 3), np.uint8), ((3, 64, 64), np.uint8)],
    ids=["depth-HWC", "depth-CHW", "rgb-HWC", "rgb-CHW"],
)
def test_se_resnet9_maps_uint8_and_float_images_of_either_layout_to_flat_features(shape, dtype) -> None:
    torch.manual_seed(0)
    encoder = ConvEncoder(shape, se_config(), dtype)
    assert encoder.input_scale == (1.0 / 255.0 if dtype == np.uint8 else 1.0)
    assert isinstance(encoder.pre, SpaceToDepth) and encoder.first.kernel_size == (1, 1)
    assert encoder.first.in_channels == 16 * min(shape[0], shape[-1])
    out = encoder(images(shape, dtype))
    assert out.shape == (2, 32) and encoder.out_features == 32 and out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_pointnav_depth_goes_through_the_image_encoder() -> None:
    space = spaces.Dict(
        {
            "depth": spaces.Box(0.0, 10.0, (64, 64, 1), np.float32),
            "pointgoal_with_gps_compass": spaces.Box(-np.inf, np.inf, (2,), np.float32),
        }
    )
    assert is_image(space["depth"]) and not is_image(space["pointgoal_with_gps_compass"])
    assert not is_image(spaces.Box(0.0, 1.0, (64, 64, 1), np.float64))
    torch.manual_seed(0)
    model = ActorCritic(space, spaces.Discrete(4), se_config())
    assert isinstance(model.encoders["depth"], ConvEncoder)
    obs = {"depth": images((64, 64, 1), np.float32, batch=3), "pointgoal_with_gps_compass": torch.randn(3, 2)}
    model.update_normalizers(obs)
    mean = model.encoders["depth"].norm.mean.item()
    assert mean == pytest.approx(obs["depth"].mean().item(), rel=1e-4)  # metres, not scaled by 1/255
    dist, value, state = model.step(obs, model.initial_state(3), torch.ones(3, dtype=torch.bool))
    assert value.shape == (3,) and state.shape == (3, 16)


def test_se_resnet9_has_four_single_block_stages_with_se_and_no_normalisation_layers() -> None:
    encoder = ConvEncoder((64, 64, 1), se_config(), np.float32)
    assert not [m for m in encoder.modules() if isinstance(m, NORM_LAYERS)]
    found = blocks(encoder)
    assert [b.conv2.out_channels for b in found] == list(WIDTHS) == [64, 128, 256, 512]
    assert [b.conv1.stride for b in found] == [(1, 1), (2, 2), (2, 2), (2, 2)]
    for block in found:  # squeeze-and-excitation with reduction 16
        assert block.se.squeeze.in_features == block.se.excite.out_features == block.conv2.out_channels
        assert block.se.squeeze.out_features == block.conv2.out_channels // 16
    assert encoder.mlp[0].in_features == 512 * 2 * 2  # 64x64: 16x16 after the stem, halved 3 times


def test_fixup_zeroes_each_blocks_second_conv_so_a_fresh_block_is_its_shortcut() -> None:
    torch.manual_seed(0)
    encoder = ConvEncoder((64, 64, 1), se_config(), np.float32)
    found = blocks(encoder)
    for block in found:
        assert torch.count_nonzero(block.conv2.weight) == 0
        assert block.fixup_scale.item() == 1.0
        assert all(getattr(block, f"fixup_bias{n}").item() == 0.0 for n in ("1a", "1b", "2a", "2b"))
        # He (fan out) scaled by L ** -0.5 for L = 4 blocks
        fan_out = block.conv1.out_channels * 9
        std = block.conv1.weight.std().item()
        assert std == pytest.approx(math.sqrt(2.0 / fan_out) * 0.5, rel=0.1)
    x = torch.relu(torch.randn(2, 64, 16, 16))  # a ReLU's output, as the stem's is
    with torch.no_grad():
        for block in found:
            expected = x if block.shortcut is None else torch.relu(block.shortcut(x))
            out = block(x)
            torch.testing.assert_close(out, expected)
            x = out
    assert found[0].shortcut is None  # the first stage keeps the size: identity


@pytest.mark.parametrize(
    ("shape", "dtype"), [((64, 64, 3), np.uint8), ((1, 64, 64), np.float32)], ids=["rgb-HWC", "depth-CHW"]
)
def test_input_normalisation_is_folded_into_the_stem_exactly(shape, dtype) -> None:
    torch.manual_seed(0)
    encoder = ConvEncoder(shape, se_config(), dtype)
    x = images(shape, dtype, batch=4)
    if dtype == np.uint8:  # channels of different statistics: space-to-depth's channel order matters
        x[..., 0] //= 4
    encoder.update_norm(x)
    pixels = encoder.nchw(x) * encoder.input_scale
    std = (encoder.norm.var + encoder.norm.epsilon).sqrt().float()
    normalised = (pixels - encoder.norm.mean.float()) / std
    explicit = encoder.mlp(encoder.rest(encoder.first(encoder.pre(normalised))))
    torch.testing.assert_close(encoder(x), explicit, atol=1e-5, rtol=1e-4)


def test_space_to_depth_rejects_sizes_that_are_not_multiples_of_4() -> None:
    with pytest.raises(ValueError, match="divisible by 4"):
        ConvEncoder((62, 64, 1), se_config(), np.float32)


def test_the_encoder_trains_on_a_tiny_regression() -> None:
    torch.manual_seed(0)
    cfg = se_config(optimizer="lamb", learning_rate=5e-3, weight_decay=1e-4)
    encoder = ConvEncoder((16, 16, 1), cfg, np.float32)
    model = nn.Sequential(encoder, nn.Linear(32, 1))
    x = images((16, 16, 1), np.float32, batch=16) * torch.rand(16, 1, 1, 1)
    target = x[:, :8].mean((1, 2, 3))  # the mean depth of the image's top half, standardised
    target = (target - target.mean()) / target.std()
    encoder.update_norm(x)
    optimizer = make_optimizer(model, cfg)
    losses = []
    for _ in range(12):
        loss = (model(x).squeeze(-1) - target).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.4 * losses[0], losses


# ----------------------------------------------------------------------------------------- LAMB
def lamb_by_hand(w, grads, lr, betas, eps, weight_decay):
    """(w after one LAMB step per gradient, each step's (||w||, unclipped trust ratio or None where a norm
    is 0)), in float64 numpy."""
    m, v, steps = np.zeros_like(w), np.zeros_like(w), []
    for t, g in enumerate(grads, start=1):
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        update = (m / (1 - betas[0] ** t)) / (np.sqrt(v / (1 - betas[1] ** t)) + eps) + weight_decay * w
        w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
        raw = min(w_norm, 10.0) / u_norm if w_norm > 0 and u_norm > 0 else None
        steps.append((w_norm, raw))
        w = w - lr * (1.0 if raw is None else float(np.clip(raw, 0.01, 100.0))) * update
    return w, steps


CASES = {  # (scale of the weights, second gradient / first, the regime the steps must reach)
    "in-range": (1.0, 0.5, lambda s: all(n < 10 and 0.01 < r < 100 for n, r in s)),
    "weight-norm-capped-at-10": (30.0, 0.5, lambda s: all(n > 10 for n, _ in s)),
    "clipped-to-0.01": (1e-4, 0.5, lambda s: s[0][1] < 0.01),
    "zero-weights-ratio-1": (0.0, 0.5, lambda s: s[0] == (0.0, None)),
    "clipped-to-100": (1.0, -0.899, lambda s: s[1][1] > 100),  # the moments nearly cancel: a tiny update
}


@pytest.mark.parametrize("case", list(CASES))
def test_lamb_step_is_adams_update_times_the_clipped_trust_ratio(case) -> None:
    w_scale, second, reached = CASES[case]
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(3, 4)) * w_scale
    g1 = rng.normal(size=(3, 4))
    grads = [g1, second * g1]
    p = nn.Parameter(torch.tensor(w0))
    opt = Lamb([p], lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=1e-3)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    expected, steps = lamb_by_hand(w0, grads, 0.01, (0.9, 0.999), 1e-6, 1e-3)
    assert reached(steps), steps
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-10, atol=1e-12)


def test_lamb_without_trust_ratio_is_adamw_and_adam() -> None:
    torch.manual_seed(0)
    for weight_decay, reference in ((0.1, torch.optim.AdamW), (0.0, torch.optim.Adam)):
        w0 = torch.randn(5, 3, dtype=torch.float64)
        a, b = nn.Parameter(w0.clone()), nn.Parameter(w0.clone())
        lamb = Lamb(
            [{"params": [a], "trust_ratio": False}], lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=weight_decay
        )
        ref = reference([b], lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=weight_decay)
        for _ in range(4):
            g = torch.randn(5, 3, dtype=torch.float64)
            a.grad, b.grad = g.clone(), g.clone()
            lamb.step()
            ref.step()
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_make_optimizer_builds_todays_adam_by_default() -> None:
    """torch's Adam with the config's settings, stepped over all tensors at once (foreach), which gives the numbers
    of torch's default per-tensor loop exactly."""
    cfg = se_config()
    model = ActorCritic(spaces.Box(0.0, 10.0, (16, 16, 1), np.float32), spaces.Discrete(4), cfg)
    optimizer = make_optimizer(model, cfg)
    twin = copy.deepcopy(model)
    expected = torch.optim.Adam(
        twin.parameters(), lr=cfg.learning_rate, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps
    )
    assert type(optimizer) is torch.optim.Adam and optimizer.defaults == {**expected.defaults, "foreach": True}
    assert len(optimizer.param_groups) == 1
    assert optimizer.param_groups[0]["params"] == list(model.parameters())
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        for a, b in zip(model.parameters(), twin.parameters(), strict=True):
            a.grad = torch.randn(a.shape, generator=generator)
            b.grad = a.grad.clone()
        optimizer.step()
        expected.step()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters(), strict=True))


def test_lamb_exempts_biases_fixup_scalars_norms_and_near_zero_tensors_from_trust_ratio_and_decay() -> None:
    cfg = se_config(optimizer="lamb", weight_decay=1e-4)
    model = ActorCritic(spaces.Box(0.0, 10.0, (16, 16, 1), np.float32), spaces.Discrete(4), cfg)
    model.extra_norm = nn.LayerNorm(8)  # a normalisation layer's parameters go with the biases
    optimizer = make_optimizer(model, cfg)
    assert isinstance(optimizer, Lamb)
    trusted, plain = optimizer.param_groups
    assert (trusted["trust_ratio"], trusted["weight_decay"]) == (True, 1e-4)
    assert (plain["trust_ratio"], plain["weight_decay"]) == (False, 0.0)
    names = {id(p): n for n, p in model.named_parameters()}
    plain_names = {names[id(p)] for p in plain["params"]}
    trusted_names = {names[id(p)] for p in trusted["params"]}
    assert len(plain_names) + len(trusted_names) == len(names)
    biases_and_scalars = ("bias", "bias_ih", "bias_hh", "fixup_scale", "extra_norm.weight")
    # initialised at or near zero, where the trust ratio would hold them still
    near_zero = {"actor.linear.weight", *(f"encoders.obs.rest.{i}.conv2.weight" for i in range(1, 5))}
    assert all(n.endswith(biases_and_scalars) or "fixup_bias" in n or n in near_zero for n in plain_names)
    assert {"extra_norm.weight", "extra_norm.bias", "encoders.obs.rest.1.fixup_scale", *near_zero} <= plain_names
    assert all(n.endswith(("weight", "weight_ih", "weight_hh")) for n in trusted_names)
    assert {"encoders.obs.first.weight", "encoders.obs.rest.1.conv1.weight", "critic.weight"} <= trusted_names


def residual_branch_growth(optimizer: str, steps: int = 100) -> list[float]:
    """Each block's last convolution: its weight norm after ``steps`` steps over its norm after the first,
    training the actor and the critic towards fixed targets on fixed images (consistent gradients)."""
    torch.manual_seed(0)
    cfg = se_config(optimizer=optimizer, learning_rate=5e-4, encoder_base_channels=8, use_rnn=False)
    model = ActorCritic(spaces.Box(0.0, 10.0, (16, 16, 1), np.float32), spaces.Discrete(4), cfg)
    opt = make_optimizer(model, cfg)
    obs = {"obs": torch.rand(16, 16, 16, 1) * 5}
    blocks = [m for m in model.modules() if isinstance(m, FixupBasicBlock)]
    for step in range(steps):
        dist, value, _ = model.step(obs, model.initial_state(16), torch.zeros(16, dtype=torch.bool))
        loss = ((value - 5.0) ** 2).mean() - dist.log_prob(torch.zeros(16, dtype=torch.long)).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        if step == 0:
            first = [b.conv2.weight.norm().item() for b in blocks]
    return [b.conv2.weight.norm().item() / n for b, n in zip(blocks, first, strict=True)]


def test_lamb_grows_every_fixup_residual_branch_as_adam_does() -> None:
    """Fixup zeroes each block's last convolution. With the trust ratio on them (ratio 1 only while
    ||w|| == 0, then min(||w||, 10) / ||update|| at its 0.01 floor) they grew 1.7-2.4x in these 100
    steps against Adam's 41-67x: the encoder was in effect its stem and shortcuts. Exempt: 91-160x."""
    lamb, adam = residual_branch_growth("lamb"), residual_branch_growth("adam")
    assert min(adam) > 10, adam
    assert min(lamb) > 10 and min(lamb) > 0.5 * min(adam), (lamb, adam)


# ----------------------------------------------------------------------------------------- learning rate
def test_sqrt_scaling_multiplies_by_the_root_of_the_minibatch_over_256_samples() -> None:
    cfg = se_config(rollout=32, batch_size=1024, learning_rate=2.5e-4, lr_scaling="sqrt")
    assert learning_rate(cfg, 0.0, 100) == pytest.approx(2.5e-4 * 2)  # sqrt(1024 / 256)
    assert learning_rate(cfg, 0.0, 100, world_size=4) == pytest.approx(2.5e-4 * 4)  # sqrt(4096 / 256)
    small = se_config(rollout=32, batch_size=128, lr_scaling="sqrt")
    assert learning_rate(small, 0.0, 100) == pytest.approx(small.learning_rate)  # never below 1x
    none = se_config(rollout=32, batch_size=1024)
    assert learning_rate(none, 0.0, 100, world_size=4) == pytest.approx(none.learning_rate)


def test_warmup_rises_linearly_from_the_unscaled_rate() -> None:
    cfg = se_config(rollout=32, batch_size=1024, learning_rate=1e-4, lr_scaling="sqrt", lr_warmup_updates=10)
    assert [learning_rate(cfg, 0.0, u) for u in (0, 5, 10, 50)] == pytest.approx([1e-4, 1.5e-4, 2e-4, 2e-4])
    no_warmup = se_config(rollout=32, batch_size=1024, learning_rate=1e-4, lr_scaling="sqrt")
    assert learning_rate(no_warmup, 0.0, 0) == pytest.approx(2e-4)


def test_schedules_by_progress() -> None:
    cosine = se_config(learning_rate=1e-3, lr_schedule="cosine")
    assert learning_rate(cosine, 0.0, 0) == pytest.approx(1e-3)
    assert learning_rate(cosine, 0.5, 0) == pytest.approx(5e-4)
    assert learning_rate(cosine, 1.0, 0) == 0.0
    linear = se_config(learning_rate=1e-3, lr_schedule="linear_decay")
    assert learning_rate(linear, 0.25, 0) == pytest.approx(7.5e-4)
    assert learning_rate(linear, 1.0, 0) == 0.0
    assert learning_rate(se_config(learning_rate=1e-3), 0.9, 0) == pytest.approx(1e-3)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lr_schedule": "exponential"}, "lr_schedule must be"),
        ({"lr_scaling": "linear"}, "lr_scaling must be"),
        ({"lr_warmup_updates": -1}, "lr_warmup_updates must be"),
        ({"optimizer": "sgd"}, "optimizer must be"),
        ({"weight_decay": 1e-4}, "weight_decay applies to optimizer='lamb' only"),
        ({"optimizer": "lamb", "weight_decay": -1.0}, "weight_decay must be"),
        ({"encoder_conv_architecture": "resnet50"}, "encoder_conv_architecture must be"),
    ],
)
def test_config_validates_the_recipes_keys(overrides, message) -> None:
    with pytest.raises(ValueError, match=message):
        se_config(**overrides)


def test_the_pointnav_recipe_trains_with_adam_on_raw_depth_as_its_curve_measured() -> None:
    """benchmarks/results/pointnav_curve.csv: LAMB with normalised depth learned nothing in 30 minutes (0.000 /
    0.010 held-out success) where Adam on raw depth reached 0.080 / 0.130; the user's command gets the latter."""
    env = gym.make_vec("vecfast/PointNav-v0", 2)
    try:
        cfg = ConfigLayers(resolve("ddppo"), "vecfast/PointNav-v0").config(env.single_observation_space)
    finally:
        env.close()
    assert cfg.optimizer == "adam" and not cfg.normalize_input
    assert cfg.encoder_conv_architecture == "se_resnet9" and cfg.lr_scaling == "sqrt"
