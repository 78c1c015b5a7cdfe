"""Training tools around the layers: activation checkpointing (the recomputed forward's held values
serve its own backward) and model ensembling with torch.func (stacked parameters, vmap over models),
both against the plain eager layers."""
import copy

import pytest
import torch
from torch.func import functional_call, grad, stack_module_state, vmap
from torch.utils.checkpoint import checkpoint

import swisk


@pytest.mark.parametrize("kan_route", ["gemm", "fused"])
@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing(rng, kan_route, reentrant):
    torch.manual_seed(rng.initial_seed())
    with swisk.config.using(kan_route=kan_route):
        kan = swisk.nn.KAN([16, 24, 8]).double()
        wav = swisk.nn.WaveletKANLinear(8, 4, batch_norm=False).double()
        twin_kan, twin_wav = copy.deepcopy(kan), copy.deepcopy(wav)
        x = torch.randn(20, 16, dtype=torch.float64, generator=rng, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        wav(kan(x)).square().sum().backward()
        y = checkpoint(lambda t: twin_wav(twin_kan(t)), x2, use_reentrant=reentrant)
        y.square().sum().backward()
    for (name, p), q in zip([*kan.named_parameters(), *wav.named_parameters()],
                            [*twin_kan.parameters(), *twin_wav.parameters()]):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-12, atol=1e-12, msg=name)
    torch.testing.assert_close(x2.grad, x.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [lambda: swisk.nn.KAN([8, 16, 4]),
                                  lambda: swisk.nn.WaveletKANLinear(8, 4, batch_norm=False),
                                  lambda: swisk.nn.SKLinear(32, 16, 2, 3)], ids=["KAN", "WaveletKANLinear", "SKLinear"])
def test_ensemble_with_vmap(rng, make):
    """Three models' stacked parameters under vmap: each model's outputs and parameter gradients."""
    torch.manual_seed(rng.initial_seed())
    models = [make().double() for _ in range(3)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    fin = 32 if isinstance(models[0], swisk.nn.SKLinear) else 8
    x = torch.randn(10, fin, dtype=torch.float64, generator=rng)

    def loss(p, b, x):
        return functional_call(base, (p, b), (x,)).square().sum()

    ys = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)
    grads = vmap(grad(loss), in_dims=(0, 0, None))(params, buffers, x)
    for k, m in enumerate(models):
        torch.testing.assert_close(ys[k], m(x), rtol=1e-12, atol=1e-12)
        m(x).square().sum().backward()
        for name, p in m.named_parameters():  # unused (Wav-KAN's weight1): None in eager, zeros from torch.func
            want = torch.zeros_like(p) if p.grad is None else p.grad
            torch.testing.assert_close(grads[name][k], want, rtol=1e-10, atol=1e-12, msg=name)
