"""torch.export of every swisk layer: the custom ops stay single nodes of the exported graph (not
decomposed into their formulation), a batch dimension exported as dynamic, and the program saved,
loaded and run gives the eager layer's outputs bitwise."""
import io

import pytest
import torch

import swisk


def _layers(rng):
    torch.manual_seed(rng.initial_seed())
    return {
        "KAN": (swisk.nn.KAN([8, 16, 4], grid_size=5), (32, 8)),
        "WaveletKANLinear": (swisk.nn.WaveletKANLinear(8, 4, wavelet_type="morlet"), (32, 8)),
        "SKLinear": (swisk.nn.SKLinear(64, 32, 2, 4), (16, 64)),
        "SKLinear seeded srht": (swisk.nn.SKLinear(64, 32, 2, 4, seed=3, operator="srht"), (16, 64)),
        "KANConv2d": (swisk.nn.KANConv2d(3, 4, 3, padding=1), (2, 3, 8, 8)),
        "SKConv2d seeded": (swisk.nn.SKConv2d(3, 8, 3, num_terms=2, low_rank=2, seed=5), (2, 3, 8, 8)),
    }


@pytest.mark.parametrize("name", ["KAN", "WaveletKANLinear", "SKLinear", "SKLinear seeded srht", "KANConv2d",
                                  "SKConv2d seeded"])
def test_export_dynamic_batch_save_load(rng, name):
    layer, shape = _layers(rng)[name]
    layer.eval()
    x = torch.randn(*shape, generator=rng)
    batch = torch.export.Dim("batch", min=2, max=4096)
    ep = torch.export.export(layer, (x,), dynamic_shapes=({0: batch},))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    if name != "SKLinear":  # stored operators: torch's GEMMs alone, by design
        assert any(t.startswith("swisk.") for t in targets), targets  # the custom ops, not their formulation
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    loaded = torch.export.load(buf).module()
    for rows in (shape[0], 3, 37):
        x = torch.randn(rows, *shape[1:], generator=rng)
        with torch.no_grad():
            want = layer(x)
        torch.testing.assert_close(loaded(x), want, rtol=0, atol=0)


def test_export_decomposed_and_trained(rng):
    """The inference IR (run_decompositions) keeps kan_linear as one node; the exported training graph
    runs backward and gives the eager layer's gradients."""
    layer, shape = _layers(rng)["KAN"]
    x = torch.randn(*shape, generator=rng)
    ep = torch.export.export(layer, (x,))
    nodes = {str(n.target) for n in ep.run_decompositions().graph.nodes if n.op == "call_function"}
    assert nodes == {"swisk.kan_linear.default"}, nodes
    exported = ep.module()
    exported(x).square().sum().backward()
    layer(x).square().sum().backward()
    got = dict(exported.named_parameters())  # by name: torch 2.6 orders an exported module's parameters otherwise
    assert got.keys() == dict(layer.named_parameters()).keys()
    for name, p in layer.named_parameters():
        torch.testing.assert_close(got[name].grad, p.grad, rtol=1e-6, atol=1e-7, msg=name)
