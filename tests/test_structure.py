"""The package's shape: no import cycles between its modules, counting the imports inside
functions (a cycle hidden that way still ties the modules together); and nothing outside
``semhuff/layers`` asks which class a layer is."""
import ast
import pathlib

import networkx as nx

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _modules():
    mods = {}
    # setup.cfg's package_dir: cli/ is semhuff.cli, eval/ semhuff.eval, data/ (its manifest)
    # semhuff._data
    for base, package in ((ROOT / "semhuff", "semhuff"), (ROOT / "cli", "semhuff.cli"),
                          (ROOT / "eval", "semhuff.eval"), (ROOT / "data", "semhuff._data")):
        for path in base.rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            name = ".".join((package,) + parts)
            mods[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return mods


def _import_graph(mods):
    graph = nx.DiGraph()
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                submodules = [f"{module}.{a.name}" for a in node.names
                              if f"{module}.{a.name}" in mods]
                targets = submodules or [module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return graph


def test_no_import_cycles_even_through_imports_inside_functions():
    graph = _import_graph(_modules())
    assert graph.number_of_edges() > 100  # the walk found the imports
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == []


def test_a_cycle_is_found_when_there_is_one():
    graph = _import_graph({"semhuff.a": _write("from .b import x\n"),
                           "semhuff.b": _write("def f():\n    from . import a\n")})
    assert [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1] == \
        [["semhuff.a", "semhuff.b"]]


def _write(text, _n=[0]):
    import tempfile
    _n[0] += 1
    path = pathlib.Path(tempfile.mkdtemp()) / f"m{_n[0]}.py"
    path.write_text(text)
    return path


def test_no_code_outside_the_layers_names_a_built_in_layer_class():
    """Layers answer for themselves (GPU program, Dask rows, options, state, devices): outside
    semhuff/layers no module names a built-in layer class (semhuff.lm's PyTorch layers are
    other classes of their own)."""
    names = {"HierarchicalSoftmax", "NegativeSampling", "ClassSoftmax", "SelfOrganizedHS"}
    offenders = []
    for name, path in _modules().items():
        if name.startswith(("semhuff.layers", "semhuff.lm")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            used = (node.id if isinstance(node, ast.Name) else
                    node.attr if isinstance(node, ast.Attribute) else
                    None)
            imported = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{name}: {n}" for n in [used, *imported] if n in names]
    assert offenders == []
