"""The package's shape: no import cycles between its modules, counting the imports inside
functions (a cycle hidden that way still ties the modules together); the two trainers' output
layers (``semhuff.lm``, PyTorch; ``semhuff.layers`` + ``semhuff.kernels``, Numba) never import
each other, and ``import semhuff`` / ``import semhuff.lm`` load no Numba; every module that
compiles with Numba's disk cache gets Numba through ``semhuff.numba_cache``; and nothing outside
``semhuff/layers`` asks which class a layer is."""
import ast
import pathlib
import subprocess
import sys

import networkx as nx
import pytest

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


def _targets(name, path, node, mods):
    """The modules (of ``mods``) that import statement ``node`` in module ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        submodules = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in mods]
        targets = submodules or [module]
    elif isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        return []
    return [t for t in targets if t in mods and t != name]


def _import_graph(mods):
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            graph.add_edges_from((name, t) for t in _targets(name, path, node, mods))
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


# -- the two trainers are siblings ------------------------------------------------------------------

LM = ("semhuff.lm",)
NUMBA_TRAINER = ("semhuff.layers", "semhuff.kernels")


def _within(name, packages):
    return any(name == p or name.startswith(p + ".") for p in packages)


def _reached(graph, sources, packages):
    """(source, path) for every module of ``packages`` that a module of ``sources`` imports,
    directly or through other modules, at module level or inside a function."""
    found = []
    for source in sorted(n for n in graph if _within(n, sources)):
        paths = nx.single_source_shortest_path(graph, source)
        found += [" -> ".join(path) for target, path in sorted(paths.items())
                  if _within(target, packages)]
    return found


def test_the_lm_layers_and_the_numba_layers_never_import_each_other():
    graph = _import_graph(_modules())
    assert any(_within(n, LM) for n in graph) and any(_within(n, NUMBA_TRAINER) for n in graph)
    assert _reached(graph, LM, NUMBA_TRAINER) == []
    assert _reached(graph, NUMBA_TRAINER, LM) == []
    # both use the self-organizer, from the trees package
    assert graph.has_edge("semhuff.lm.layers.self_organized", "semhuff.trees.organizer")
    assert graph.has_edge("semhuff.layers.self_organized", "semhuff.trees.organizer")


def test_the_sibling_check_sees_an_import_inside_a_function_and_through_another_module():
    graph = _import_graph({"semhuff.lm.a": _write("def f():\n    from ..trees import b\n"),
                           "semhuff.trees.b": _write("from ..layers.c import x\n"),
                           "semhuff.layers.c": _write("x = 1\n"),
                           "semhuff.layers.d": _write("import semhuff.lm.a\n")})
    assert _reached(graph, LM, NUMBA_TRAINER) == [
        "semhuff.lm.a -> semhuff.trees.b -> semhuff.layers.c"]
    assert _reached(graph, NUMBA_TRAINER, LM) == ["semhuff.layers.d -> semhuff.lm.a"]


def _python(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(ROOT), timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_import_semhuff_lm_loads_no_numba():
    pytest.importorskip("torch")
    assert _python("import sys, semhuff.lm; print('numba' in sys.modules, "
                   "'semhuff.layers' in sys.modules, 'semhuff.kernels' in sys.modules)") == \
        ["False", "False", "False"]


def test_import_semhuff_loads_no_numba_until_an_export_is_used():
    got = _python("import sys, semhuff\n"
                  "print('numba' in sys.modules, 'semhuff.model' in sys.modules)\n"
                  "import semhuff.eval.suite\n"
                  "print('numba' in sys.modules)\n"
                  "print(semhuff.Word2Vec.__module__, 'numba' in sys.modules)\n"
                  "print(all(getattr(semhuff, n) is not None for n in semhuff.__all__))\n"
                  "print(sorted(set(semhuff.__all__) - set(dir(semhuff))))\n")
    assert got == ["False", "False", "False", "semhuff.model", "True", "True", "[]"]
    assert _python("import semhuff\ntry:\n    semhuff.NoSuchName\n"
                   "except AttributeError as e:\n    print(type(e).__name__)") == ["AttributeError"]


def _cached_njit(tree):
    return any(isinstance(node, ast.keyword) and node.arg == "cache"
               and isinstance(node.value, ast.Constant) and node.value.value is True
               for node in ast.walk(tree))


def _numba_cache_offenders(mods):
    """(modules checked, offenders): modules compiling with ``cache=True`` that do not import
    ``semhuff.numba_cache`` at module level before anything of Numba's."""
    offenders, checked = [], 0
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        if name == "semhuff.numba_cache" or not _cached_njit(tree):
            continue
        checked += 1
        for node in tree.body:  # module level, in order
            if "semhuff.numba_cache" in _targets(name, path, node, mods):
                break
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "numba"
                                                    for a in node.names) or \
                    isinstance(node, ast.ImportFrom) and not node.level and \
                    (node.module or "").split(".")[0] == "numba":
                offenders.append(f"{name}: imports numba before semhuff.numba_cache")
                break
        else:
            offenders.append(f"{name}: does not import semhuff.numba_cache at module level")
    return checked, offenders


def test_modules_that_cache_numba_functions_get_numba_through_numba_cache():
    """Numba picks a function's cache locator when its decorator runs, and ``import semhuff``
    does not install semhuff's: each module that compiles with ``cache=True`` imports
    ``semhuff.numba_cache`` (which installs it) before anything of Numba's."""
    checked, offenders = _numba_cache_offenders(_modules())
    assert checked >= 10  # the trees, the kernels, fastscan
    assert offenders == []


def test_the_numba_cache_check_finds_a_module_without_it():
    cache = _write("import numba\n")
    cached = "@numba.njit(cache=True)\ndef f():\n    pass\n"
    mods = {"semhuff.numba_cache": cache,
            "semhuff.good": _write("from .numba_cache import numba\n" + cached),
            "semhuff.late": _write("import numba\nfrom . import numba_cache\n" + cached),
            "semhuff.inside": _write("import numba\ndef g():\n    from . import numba_cache\n"
                                     + cached),
            "semhuff.uncached": _write("import numba\n@numba.njit\ndef f():\n    pass\n")}
    checked, offenders = _numba_cache_offenders(mods)
    assert checked == 3
    assert offenders == ["semhuff.late: imports numba before semhuff.numba_cache",
                         "semhuff.inside: imports numba before semhuff.numba_cache"]


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


# -- the LM application asks its layers, never names them ----------------------------------------

# the semhuff-lm application: everything of semhuff.lm but the layers, their kernels, the package's
# own exports (__init__) and the former names (_moved), and the semhuff-lm script
LM_LAYER_SIDE = ("semhuff.lm.layers", "semhuff.lm.kernels")
LM_APPLICATION_EXCEPT = ("semhuff.lm", "semhuff.lm._moved")


def _lm_application(mods):
    return {name: path for name, path in mods.items()
            if (_within(name, ("semhuff.lm",)) and not _within(name, LM_LAYER_SIDE)
                and name not in LM_APPLICATION_EXCEPT) or name == "semhuff.cli.lm"}


def _names_of_layers(mods, classes, names):
    """``module: what`` for every layer class (``classes``) a module of ``mods`` names (a name,
    an attribute, an import) and every layer's registry name (``names``) it holds as a whole
    string: the application asks a layer what it can do (``layers_with``,
    ``rebuild_settings``, ``trainer_defaults``), never which one it is."""
    offenders = []
    for name, path in sorted(mods.items()):
        for node in ast.walk(ast.parse(path.read_text())):
            used = (node.id if isinstance(node, ast.Name) else
                    node.attr if isinstance(node, ast.Attribute) else None)
            imported = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{name}: {n}" for n in [used, *imported] if n in classes]
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value in names:
                offenders.append(f"{name}: {node.value!r}")
    return offenders


def _lm_layers():
    pytest.importorskip("torch")
    from semhuff.lm import _moved
    from semhuff.lm.layers.registry import LM_LAYERS
    classes = {cls.__name__ for cls in LM_LAYERS.values()} | set(_moved._CLASSES)
    return classes, set(LM_LAYERS)


def test_the_lm_application_never_names_a_layer_class_or_a_layers_name():
    classes, names = _lm_layers()
    app = _lm_application(_modules())
    assert {"semhuff.lm.trainer", "semhuff.lm.settings", "semhuff.lm.models",
            "semhuff.lm.checkpoint", "semhuff.lm.generate", "semhuff.cli.lm"} <= set(app)
    assert not any(_within(n, LM_LAYER_SIDE) for n in app)
    assert {"TreeSoftmax", "ClassSoftmax", "TwoLevelSoftmax"} <= classes and "tree" in names
    assert _names_of_layers(app, classes, names) == []


def test_the_lm_layer_name_check_finds_a_class_an_import_and_a_name():
    classes, names = _lm_layers()
    mods = {"semhuff.lm.a": _write("from .layers.tree import TreeSoftmax\n"),
            "semhuff.lm.b": _write("def f(layer):\n    return isinstance(layer, layers.ClassSoftmax)\n"),
            "semhuff.lm.c": _write("def f(s):\n    return s.output != 'tree'\n"),
            "semhuff.lm.d": _write("'''A tree layer's docstring.'''\nx = 'a tree'\n")}
    assert _names_of_layers(mods, classes, names) == [
        "semhuff.lm.a: TreeSoftmax", "semhuff.lm.b: ClassSoftmax", "semhuff.lm.c: 'tree'"]
