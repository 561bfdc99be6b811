"""`dualview.registry.Registry`: one pattern for every named kind (objectives, benchmarks,
formats, engines, query encodings, heads), extensible by a call or by an entry point."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dualview.errors import ConfigError
from dualview.registry import Registry, UnknownNameError


def test_register_get_names_and_the_decorator() -> None:
    shapes: Registry[type] = Registry("shape", field="model.shape")
    shapes.register("square", int)

    @shapes.register("circle")
    class Circle:
        pass

    assert shapes.names() == ["circle", "square"] and "circle" in shapes
    assert shapes.get("circle") is Circle and shapes.get("square") is int
    assert list(shapes) == ["circle", "square"] and len(shapes) == 2


def test_a_name_registers_once_unless_replaced() -> None:
    shapes: Registry[type] = Registry("shape", field="model.shape", entries={"square": int})
    with pytest.raises(ValueError, match="'square' is already registered"):
        shapes.register("square", float)
    shapes.register("square", float, replace=True)
    assert shapes.get("square") is float
    shapes.remove("square")
    assert "square" not in shapes


def test_an_unknown_name_is_one_located_error_listing_the_known_names() -> None:
    shapes: Registry[type] = Registry("shape", field="model.shape", entries={"b": int, "a": int})
    with pytest.raises(UnknownNameError) as caught:
        shapes.get("c")
    assert str(caught.value) == "model.shape: unknown shape 'c'; known: a, b"
    assert isinstance(caught.value, ConfigError)  # the CLI prints it as one line, exit 2
    with pytest.raises(UnknownNameError, match=r"^run\.yaml: shape: unknown shape 'c'"):
        shapes.get("c", where="run.yaml: shape")
    assert shapes.unknown_message("c", where="") == "unknown shape 'c'; known: a, b"


def test_a_dotted_path_is_imported_on_first_use_only(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "lazy_plugin_mod.py").write_text("VALUE = object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    things: Registry[object] = Registry("thing", field="thing")
    things.register("lazy", "lazy_plugin_mod:VALUE")
    assert "lazy_plugin_mod" not in sys.modules  # registering imports nothing
    value = things.get("lazy")
    assert value is sys.modules["lazy_plugin_mod"].VALUE and things.get("lazy") is value
    monkeypatch.delitem(sys.modules, "lazy_plugin_mod")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_colon_here", "is not a 'module:attribute' path"),
        ("no_such_module_xyz:thing", "cannot import 'no_such_module_xyz'"),
        ("json:no_such_attribute", "'json' has no attribute 'no_such_attribute'"),
    ],
)
def test_a_bad_dotted_path_is_a_config_error_naming_the_entry(path: str, message: str) -> None:
    things: Registry[object] = Registry("thing", field="thing", entries={"broken": path})
    with pytest.raises(ConfigError, match=rf"thing 'broken': .*{message}"):
        things.get("broken")


def _install_plugin(root: Path, group: str, line: str) -> None:
    """A distribution on ``root`` declaring one entry point, as pip would install it."""
    (root / "shape_plugin.py").write_text("class Hexagon:\n    sides = 6\n")
    info = root / "shape_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shape-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{line}\n")


def test_an_entry_point_registers_from_outside_the_package(tmp_path: Path, monkeypatch) -> None:
    _install_plugin(tmp_path, "dualview.test_shapes", "hexagon = shape_plugin:Hexagon")
    monkeypatch.syspath_prepend(str(tmp_path))
    shapes: Registry[type] = Registry(
        "shape", field="model.shape", group="dualview.test_shapes", entries={"square": int}
    )
    assert shapes.names() == ["hexagon", "square"]
    assert shapes.get("hexagon").sides == 6
    monkeypatch.delitem(sys.modules, "shape_plugin")


def test_a_built_in_name_wins_over_an_entry_point_of_the_same_name(
    tmp_path: Path, monkeypatch
) -> None:
    _install_plugin(tmp_path, "dualview.test_shapes", "square = shape_plugin:Hexagon")
    monkeypatch.syspath_prepend(str(tmp_path))
    shapes: Registry[type] = Registry(
        "shape", field="model.shape", group="dualview.test_shapes", entries={"square": int}
    )
    assert shapes.get("square") is int
