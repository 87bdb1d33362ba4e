"""An algorithm from the user's own module (examples/opo.py, imported from outside the package through
``algorithm.imports``) is chosen, configured and refused like a built-in one; registering is checked."""

import sys
from pathlib import Path

import pytest
import torch
from pydantic import Field

from flywheel.algorithms import ALGORITHMS, Algorithm, make_algorithm, register_algorithm
from flywheel.config import load_config
from flywheel.config.algorithms import ALGORITHM_CONFIGS, ClipConfig, GRPOConfig
from flywheel.config.loading import ConfigError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/opo.py"
PLUGIN = ["algorithm.imports=[opo]", "algorithm.name=opo"]


@pytest.fixture
def on_path(monkeypatch):
    """examples/ importable; afterwards the registries and modules as they were (the docs' reference is generated
    from the registry in this process too)."""
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    yield
    ALGORITHMS.pop("opo", None), ALGORITHM_CONFIGS.pop("opo", None), sys.modules.pop("opo", None)


def test_the_example_stays_one_short_file():
    assert len(EXAMPLE.read_text().splitlines()) <= 60


def test_algorithm_imports_makes_the_users_algorithm_selectable(on_path):
    config = load_config(REPO / "configs/quickstart.yaml", [*PLUGIN, "algorithm.length_power=0.5", "algorithm.clip_high=0.28"])
    opo = sys.modules["opo"]
    assert type(config.algorithm) is opo.OPOConfig and config.algorithm.length_power == 0.5 and config.algorithm.clip_high == 0.28
    assert ALGORITHMS["opo"] is opo.OPO and ALGORITHM_CONFIGS["opo"] is opo.OPOConfig
    assert config.model_dump()["algorithm"]["length_power"] == 0.5  # written out whole (the run directory's config.yaml)
    assert isinstance(make_algorithm(config.algorithm), opo.OPO)


@pytest.mark.parametrize(
    "overrides, sentence",
    [
        (
            ["algorithm.imports=[opo]", "algorithm.name=opo", "algorithm.std_scale=none"],
            "'algorithm.std_scale' is not a setting of algorithm 'opo' (its keys: name, imports,",
        ),
        (
            ["algorithm.imports=[opo]", "algorithm.name=opo", "algorithm.length_power=-1"],
            "bad value for 'algorithm.length_power': Input should be greater than or equal to 0",
        ),
        (["algorithm.name=opo_typo", "algorithm.imports=[opo]"], "unknown algorithm.name 'opo_typo': use one of grpo, dr_grpo, dapo"),
        (
            ["algorithm.imports=[no_such_module]", "algorithm.name=opo"],
            "algorithm.imports: cannot import 'no_such_module' (No module named 'no_such_module'); put its folder on PYTHONPATH",
        ),
        (["algorithm.imports=opo"], "algorithm.imports must be a list of module names, e.g. [my_algorithm] (got 'opo')"),
    ],
)
def test_a_plugin_config_mistake_is_one_sentence(on_path, overrides, sentence):
    with pytest.raises(ConfigError) as caught:
        load_config(REPO / "configs/quickstart.yaml", overrides)
    assert sentence in str(caught.value) and "\n" not in str(caught.value)


def test_a_module_that_fails_to_import_is_one_sentence(tmp_path, monkeypatch):
    (tmp_path / "broken_algorithm.py").write_text("def broken(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        load_config(REPO / "configs/quickstart.yaml", ["algorithm.imports=[broken_algorithm]"])
    assert "algorithm.imports: importing 'broken_algorithm' raised SyntaxError: " in str(caught.value) and "\n" not in str(caught.value)


def test_an_unregistered_name_says_where_algorithms_come_from():
    with pytest.raises(ConfigError, match=r"\(or add the module registering yours to algorithm.imports\)$"):
        load_config(REPO / "configs/quickstart.yaml", ["algorithm.name=my_algorithm"])


def test_opo_advantages_by_hand(on_path):
    from opo import opo_advantages

    rewards = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    lengths = torch.tensor([[2, 4, 6], [3, 3, 9]])
    valid = torch.tensor([[True, True, True], [True, False, True]])
    # group 1: baseline (2*1 + 4*0 + 6*0) / 12 = 1/6; group 2 (the second left out): (3*1 + 9*0) / 12 = 1/4
    expected = torch.tensor([[5 / 6, -1 / 6, -1 / 6], [3 / 4, 0.0, -1 / 4]])
    assert torch.allclose(opo_advantages(rewards, lengths, valid, 1.0), expected)
    # power 0: the plain group mean (GRPO's centring without the std)
    assert torch.allclose(opo_advantages(rewards, lengths, valid, 0.0)[0], rewards[0] - 1 / 3)


def test_token_advantages_broadcast_over_each_completion_s_tokens(on_path):
    from opo import OPO, OPOConfig

    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)  # one group of two: lengths 2 and 4
    advantages, returns = OPO(OPOConfig()).token_advantages(torch.tensor([[1.0, 0.0]]), None, mask, None)
    # baseline (2*1 + 4*0) / 6 = 1/3
    assert returns is None and torch.allclose(advantages, torch.tensor([[2 / 3, 2 / 3, 0, 0], [-1 / 3, -1 / 3, -1 / 3, -1 / 3]]))


def test_registering_is_checked():
    class TakenConfig(ClipConfig):
        name: str = Field("grpo")

    class Taken(Algorithm):
        config_type = TakenConfig

    with pytest.raises(ValueError, match=r"algorithm name 'grpo' is taken by flywheel.config.algorithms.GRPOConfig"):
        register_algorithm(Taken)
    with pytest.raises(TypeError, match="a subclass of Algorithm whose config_type is its own config class"):
        register_algorithm(type("NoConfig", (Algorithm,), {}))
    assert ALGORITHM_CONFIGS["grpo"] is GRPOConfig and "Taken" not in {cls.__name__ for cls in ALGORITHMS.values()}


def test_the_docs_page_shows_the_example_as_it_is():
    page = (REPO / "docs/new_algorithm.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```" in page


def test_the_session_page_shows_its_example_as_it_is():
    page = (REPO / "docs/session.md").read_text()
    assert f"```python\n{(REPO / 'examples/rejection_sft.py').read_text()}```" in page
