"""Mixed-source attention: one pass over a window equals token-by-token archiving.

Expectations, on a tiny random llama whose weights are drawn with a larger spread than the stock
tiny model (initializer_range 0.1), so that archiving visibly moves the NLL:
1. In exact mode the pass equals the model's own forward (and the sliding-window layers of
   gemma3 are masked like the model masks them).
2. In archive mode it equals the token-by-token reference (|mean NLL delta| < 1e-4) for a
   group quantizer (int2/int4 KIVI) and for RVQ, while differing clearly from the exact NLL; in
   float64 every token agrees to 1e-9 (float32 noise can flip a near-tied choice).
3. The check is sharp: the same pass with the exact window one token longer does NOT match.
4. Nothing changes before the first token leaves the window: NLLs of queries t < sinks + recent
   equal the exact ones; query t = sinks + recent is the first that differs (archive and evict).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bench.lib.baselines import KiviConfig, KiviQuantizer
from grm.archive.harvest import harvest, rotate_per_token
from bench.lib.mixed_attention import ARCHIVE, EVICT, EXACT, MixedSpec, WindowConfig, window_nll
from grm.archive.rvq import RVQConfig, RVQQuantizer, train_rvq
from bench.lib.stepwise import stepwise_nll
from grm.dialects import dialect_for
from grm.models.tokenizer import ByteTokenizer

TEXT = ("The harbor seal swam past the station at dawn, while the village market opened its doors. "
        "Morning frost covered the orchard; the robot team checked every sensor and wheel. ") * 2
WINDOW = WindowConfig(sinks=4, recent=32)


@pytest.fixture(scope="module")
def sharp():
    """(model, dialect, ids): a tiny llama with sharper random weights, and a 132-token window."""
    from transformers import AutoModelForCausalLM

    from grm.models.tiny import tiny_config

    torch.set_num_threads(2)
    cfg = tiny_config("llama")
    cfg.initializer_range = 0.1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    tok = ByteTokenizer()
    ids = list(tok.sink_ids) + tok.encode(TEXT)[:128]
    return model, dialect_for(model), ids


def _forward_nll(model, ids):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), logits_to_keep=0).logits[0, :-1]
    return F.cross_entropy(logits, torch.tensor(ids[1:]), reduction="none").double()


def test_exact_mode_equals_the_models_own_forward(sharp):
    model, dialect, ids = sharp
    got = window_nll(model, ids, MixedSpec(EXACT, dialect, WINDOW))
    assert (got - _forward_nll(model, ids)).abs().max() < 1e-5
    assert model.config._attn_implementation != "grm_mixed"  # switched back after the pass


def test_exact_mode_masks_sliding_window_layers_like_the_model(tiny_models):
    lm = tiny_models["gemma3"]
    dialect = dialect_for(lm.model)
    assert any(w is not None for w in dialect.sliding_window)
    ids = list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(TEXT)[:60]  # longer than the 16-token window
    got = window_nll(lm.model, ids, MixedSpec(EXACT, dialect, WINDOW))
    assert (got - _forward_nll(lm.model, ids)).abs().max() < 1e-5


@pytest.fixture(scope="module")
def rvq(sharp):
    model, dialect, _ = sharp
    tok = ByteTokenizer()
    train = [list(tok.sink_ids) + tok.encode("Winter light on the north river; a team meeting at the market. " * 6)[:300]]
    kv = harvest(model, dialect, train, skip=4, dtype=torch.float32).kv
    return train_rvq(kv, RVQConfig(k=16, key_stages=2, value_stages=1, iters=8, max_train=300), "tiny")


@pytest.mark.parametrize("which", ["int2", "int4", "rvq"])
def test_one_pass_equals_token_by_token_archiving(sharp, rvq, which):
    model, dialect, ids = sharp
    quantizer = {"int2": KiviQuantizer(KiviConfig(2, 32)), "int4": KiviQuantizer(KiviConfig(4, 16)),
                 "rvq": RVQQuantizer(rvq, 2, 1)}[which]
    spec = MixedSpec(ARCHIVE, dialect, WINDOW, quantizer)
    mixed = window_nll(model, ids, spec)
    reference = stepwise_nll(model, ids, spec)
    exact = window_nll(model, ids, MixedSpec(EXACT, dialect, WINDOW))
    # float32: rounding noise may flip a near tie in one path (see the float64 test for the tight check)
    assert abs(float(mixed.mean() - reference.mean())) < 1e-4
    assert (mixed - exact).abs().max() > 1e-2  # archiving really changed something


@pytest.mark.parametrize("which", ["int2", "rvq"])
def test_in_float64_the_two_agree_to_rounding(sharp, rvq, which):
    """In float32, rounding noise can flip a near-tied argmin (RVQ) or rounding step (KIVI) in one
    path and not the other, and the flip propagates; in float64 nothing is near enough to flip."""
    import copy

    model, dialect, ids = sharp
    model64 = copy.deepcopy(model).double()
    quantizer = {"int2": KiviQuantizer(KiviConfig(2, 32)), "rvq": RVQQuantizer(rvq, 2, 1)}[which]
    spec = MixedSpec(ARCHIVE, dialect, WINDOW, quantizer)
    mixed = window_nll(model64, ids, spec)
    reference = stepwise_nll(model64, ids, spec)
    assert mixed.dtype == torch.float64
    assert (mixed - reference).abs().max() < 1e-9


def test_the_equivalence_check_detects_an_off_by_one_window(sharp):
    model, dialect, ids = sharp
    quantizer = KiviQuantizer(KiviConfig(2, 32))
    reference = stepwise_nll(model, ids, MixedSpec(ARCHIVE, dialect, WINDOW, quantizer))
    longer = window_nll(model, ids, MixedSpec(ARCHIVE, dialect, WindowConfig(4, 33), quantizer))
    assert (longer - reference).abs().max() > 1e-2


@pytest.mark.parametrize("mode", [ARCHIVE, EVICT])
def test_nothing_changes_until_the_first_token_leaves_the_window(sharp, mode):
    model, dialect, ids = sharp
    exact = window_nll(model, ids, MixedSpec(EXACT, dialect, WINDOW))
    quantizer = KiviQuantizer(KiviConfig(2, 32)) if mode == ARCHIVE else None
    got = window_nll(model, ids, MixedSpec(mode, dialect, WINDOW, quantizer))
    first = WINDOW.sinks + WINDOW.recent  # query 36 is the first to lose token 4 to the archive
    assert (got[:first] - exact[:first]).abs().max() < 1e-6
    assert abs(float(got[first] - exact[first])) > 1e-4
    # With a window as long as the text nothing ever leaves it.
    everything = WindowConfig(4, len(ids))
    assert (window_nll(model, ids, MixedSpec(mode, dialect, everything, quantizer)) - exact).abs().max() < 1e-6


def test_spec_validation(sharp, tiny_models):
    _, dialect, _ = sharp
    with pytest.raises(ValueError, match="quantizer"):
        MixedSpec(ARCHIVE, dialect, WINDOW)
    with pytest.raises(ValueError, match="exceed"):
        MixedSpec(ARCHIVE, dialect, WindowConfig(4, 16), KiviQuantizer(KiviConfig(4, 32)))
    with pytest.raises(ValueError, match="position-free"):
        MixedSpec(ARCHIVE, dialect_for(tiny_models["gpt2"].model), WINDOW, KiviQuantizer(KiviConfig(4, 32)))
    with pytest.raises(ValueError):
        MixedSpec("lossy", dialect, WINDOW)
    with pytest.raises(ValueError):
        WindowConfig(4, 0)


def test_rotate_per_token_undoes_itself_and_matches_reseat(sharp):
    _, dialect, _ = sharp
    keys = torch.randn(2, 10, dialect.head_dim)
    pos = torch.arange(100, 110)
    inv = dialect.inv_freq[0]
    back = rotate_per_token(rotate_per_token(keys, inv, pos), inv, -pos)
    assert (back - keys).abs().max() < 1e-5
    same = rotate_per_token(keys, inv, torch.full((10,), 37))
    assert (same - dialect.reseat(keys, 0, 37)).abs().max() < 1e-6
