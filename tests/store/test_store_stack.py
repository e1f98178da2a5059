"""The store stack is assembled once, by the composition root (issue 49, part 3).

The store every service holds is a stack of layers (brain/app.py ``Brain._assemble``): the
integrity guard, request stamping, the model switch's tracking, the backend. Three checks keep
it that way:

(a) no layer passes calls through ``__getattr__``: each forwards the ``VectorStore`` protocol
    method by method (brain/vector_store/forwarding.py), so the type checker sees it;
(b) no code outside brain/app.py rewires a collaborator after start: an assignment to a
    collaborator attribute of *another* object (``brain.store = ...``, ``x.memory.store =
    ...``, ``guarded.inner = ...``) is refused everywhere but the composition root. A class
    may set its own attributes (``self.inner = ...``): that is how a layer built once, such as
    the model switch's ``TrackedStore``, changes what it does when asked through a method;
(c) after open, every service the Brain built holds the one outermost store object.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from brain.app import Brain
from brain.store.guarded import GuardedStore
from brain.vector_store.forwarding import ForwardingStore, backend_of, layers_of
from config import Settings

ROOT = Path(__file__).resolve().parents[2]
STACK_PACKAGES = ("brain/store", "brain/vector_store", "brain/generations", "brain/process")
# Everything that could reach a service: the product's packages and its doors.
SCANNED = ("brain", "mcp_surface", "webui", "mcp_server.py")
COMPOSITION_ROOT = "brain/app.py"


def _py_files(*roots: str) -> Iterator[Path]:
    for root in roots:
        path = ROOT / root
        yield from [path] if path.is_file() else sorted(path.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ------------------------------------------------------------------------------ (a)
def pass_throughs(source: str) -> list[str]:
    """``Class.__getattr__`` (or ``__getattribute__``) defined in a class body. A module's
    PEP 562 ``__getattr__`` (a lazy package face) is no pass-through and is not counted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            found += [f"{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                      and item.name in ("__getattr__", "__getattribute__")]
    return found


def test_the_pass_through_check_finds_a_planted_one() -> None:
    planted = (
        "def __getattr__(name):\n    return name\n"  # a package face: allowed
        "class Wrapper:\n    def __getattr__(self, name):\n        return getattr(self.x, name)\n"
    )
    assert pass_throughs(planted) == ["Wrapper.__getattr__"]


def test_no_getattr_pass_through_in_the_store_stack() -> None:
    found = {_rel(p): hits for p in _py_files(*STACK_PACKAGES)
             if (hits := pass_throughs(p.read_text(encoding="utf-8")))}
    assert found == {}, f"forward explicitly (ForwardingStore), never by __getattr__: {found}"


def test_the_forwarding_store_writes_out_every_method_of_the_protocol() -> None:
    """A method added to VectorStore must be forwarded explicitly, or no layer would have it."""
    tree = ast.parse((ROOT / "brain/vector_store/base.py").read_text(encoding="utf-8"))
    protocol = next(n for n in tree.body if isinstance(n, ast.ClassDef)
                    and n.name == "VectorStore")
    methods = {n.name for n in protocol.body if isinstance(n, ast.FunctionDef)}
    assert len(methods) >= 20
    assert methods - set(vars(ForwardingStore)) == set()


# ------------------------------------------------------------------------------ (b)
def _classes() -> dict[str, ast.ClassDef]:
    out: dict[str, ast.ClassDef] = {}
    for path in _py_files("brain"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                out[node.name] = node
    return out


def _stack_links(classes: dict[str, ast.ClassDef]) -> set[str]:
    """The collaborators a store-stack layer is built with: the parameters of the constructor
    of ForwardingStore and of every subclass of it, where typed with a class (``inner:
    VectorStore``, ``manifest: Manifest``, ``dirty: DirtyLog | None``), not a plain value
    (``epoch: int``, ``model: str``)."""
    layers = {"ForwardingStore"}
    grew = True
    while grew:
        grew = False
        for name, cls in classes.items():
            if name not in layers and any(isinstance(b, ast.Name) and b.id in layers
                                          for b in cls.bases):
                layers.add(name)
                grew = True
    plain = {"int", "str", "float", "bool", "bytes", "frozenset", "set", "None"}
    links = set()
    for name in layers:
        for item in classes[name].body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = item.args.args[1:] + item.args.kwonlyargs
                for arg in args:
                    types = {n.id for n in ast.walk(arg.annotation)
                             if isinstance(n, ast.Name)} if arg.annotation else set()
                    if types - plain:
                        links.add(arg.arg)
    return links


def _brain_parts() -> set[str]:
    """What the composition root builds and hands on: the Brain's annotated attributes, its
    services (cached properties) and the parts its constructor keeps."""
    tree = ast.parse((ROOT / COMPOSITION_ROOT).read_text(encoding="utf-8"))
    brain = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Brain")
    parts: set[str] = set()
    for item in brain.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            parts.add(item.target.id)
        elif isinstance(item, ast.FunctionDef):
            if any(isinstance(d, ast.Attribute) and d.attr == "cached_property"
                   for d in item.decorator_list):
                parts.add(item.name)
            elif item.name == "__init__":
                parts |= {t.attr for n in ast.walk(item) if isinstance(n, ast.Assign)
                          for t in n.targets if isinstance(t, ast.Attribute)
                          and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return parts


def collaborators() -> set[str]:
    return _brain_parts() | _stack_links(_classes())


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        stack = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        stack = [node.target]
    else:
        return
    while stack:
        t = stack.pop()
        if isinstance(t, ast.Tuple | ast.List):
            stack.extend(t.elts)
        elif isinstance(t, ast.Starred):
            stack.append(t.value)
        else:
            yield t


def _is_own(obj: ast.expr) -> bool:
    return isinstance(obj, ast.Name) and obj.id in ("self", "cls")


def rewirings(source: str, names: set[str]) -> list[str]:
    """Assignments of a collaborator (an attribute in ``names``) of another object: ``obj.name
    = ...`` (also in a tuple, augmented or annotated) and ``setattr(obj, "name", ...)``, where
    ``obj`` is anything but ``self`` / ``cls``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for t in _targets(node):
            if isinstance(t, ast.Attribute) and t.attr in names and not _is_own(t.value):
                found.append(ast.unparse(t))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "setattr" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in names
                and not _is_own(node.args[0])):
            found.append(f"setattr({ast.unparse(node.args[0])}, {node.args[1].value!r})")
    return found


# Assignments the rule finds by name that set a plain record's field of the same name, not a
# collaborator: (file, target) -> what it is. The test fails when one no longer occurs, so an
# entry cannot outlive its reason. Nothing that rewires a service may be added here.
NOT_COLLABORATORS: dict[tuple[str, str], str] = {
    ("brain/search/fusion.py", "c.bm25"): "a candidate's BM25 score",
    ("brain/sources/queue.py", "job.paths"): "the paths a queued sync job covers",
    ("mcp_surface/lean.py", "listed.meta"): "a listed MCP tool's meta field",
    ("brain/generations/service.py", "s.previous"): "the previous generation's number, on the "
                                                    "recorded state",
}


def test_the_rewiring_check_finds_planted_ones() -> None:
    planted = (
        "def install(brain, x, guarded, wrapped):\n"
        "    brain.store = wrapped\n"
        "    x.memory.store = wrapped\n"
        "    guarded.inner = wrapped\n"
        "    guarded.inner, y = wrapped, 1\n"
        "    setattr(brain, 'embedder', wrapped)\n"
        "    brain.pending = 1\n"  # not a collaborator
        "class Layer:\n"
        "    def __init__(self, inner):\n"
        "        self.inner = inner\n"  # a class sets its own: allowed
        "    def serve(self, other):\n"
        "        self.inner = other\n"
        "        self.tracked.inner = other\n"  # another object's, reached through self
    )
    names = collaborators()
    assert {"store", "memory", "embedder", "inner", "manifest", "dirty"} <= names
    assert rewirings(planted, names) == [
        "brain.store", "x.memory.store", "guarded.inner", "guarded.inner",
        "setattr(brain, 'embedder')", "self.tracked.inner",
    ]


def test_no_collaborator_is_rewired_outside_the_composition_root() -> None:
    names = collaborators()
    found: set[tuple[str, str]] = set()
    for path in _py_files(*SCANNED):
        rel = _rel(path)
        if rel != COMPOSITION_ROOT:
            found |= {(rel, t) for t in rewirings(path.read_text(encoding="utf-8"), names)}
    assert found - NOT_COLLABORATORS.keys() == set(), (
        "a collaborator is replaced after start outside brain/app.py: build it into the stack "
        "there, or give the owning class a method that changes its behaviour")
    assert NOT_COLLABORATORS.keys() - found == set(), "stale NOT_COLLABORATORS entries"


# ------------------------------------------------------------------------------ (c)
def _stores_held(obj: Any, depth: int = 3, seen: set[int] | None = None,
                 path: str = "") -> Iterator[tuple[str, Any]]:
    """(where, store) for each store object reachable from ``obj`` through attributes,
    dataclass fields and containers of brain objects, ``depth`` steps down; a store is not
    looked into."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth < 0:
        return
    seen.add(id(obj))
    if isinstance(obj, ForwardingStore) or type(obj).__name__ in ("EdgeStore",
                                                                  "QdrantClientStore"):
        yield path, obj
        return
    if isinstance(obj, list | tuple | set | frozenset):
        for i, item in enumerate(list(obj)[:50]):
            yield from _stores_held(item, depth - 1, seen, f"{path}[{i}]")
        return
    if isinstance(obj, dict):
        for k, v in list(obj.items())[:50]:
            yield from _stores_held(v, depth - 1, seen, f"{path}[{k!r}]")
        return
    if not type(obj).__module__.startswith("brain.") or isinstance(obj, Brain):
        return
    fields: dict[str, Any] = {}
    if dataclasses.is_dataclass(obj):
        fields.update({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    fields.update(getattr(obj, "__dict__", {}))
    for name, value in fields.items():
        yield from _stores_held(value, depth - 1, seen, f"{path}.{name}")


def _services(brain: Brain) -> dict[str, Any]:
    """Every part the Brain builds: those open() sets (memory, meta, graph, embedder) and the
    services (its cached properties), built now."""
    names = ["memory", "meta", "graph", "embedder"]
    names += [n for n, v in vars(Brain).items() if type(v).__name__ == "cached_property"]
    return {n: getattr(brain, n) for n in names}


# The one service that holds a layer under the outermost store: the model switch drives its
# own TrackedStore layer (log_to, serve) and holds the generations it builds or keeps.
OWN_LAYERS = {("model_switch", ".tracked"), ("model_switch", ".d.tracked"),
              ("model_switch", ".target"), ("model_switch", ".previous")}


def test_every_service_holds_the_one_outermost_store(brain: Brain) -> None:
    outer = brain.store
    assert isinstance(outer, GuardedStore)
    layers = layers_of(outer)
    assert [type(x).__name__ for x in layers[:3]] == [
        "GuardedStore", "RequestStampingStore", "TrackedStore"]
    assert layers[-1] is backend_of(outer)
    services = _services(brain)
    assert len(services) >= 15
    held = {(name, where): store for name, svc in services.items()
            for where, store in _stores_held(svc)}
    assert ("memory", ".store") in held  # the walk reaches what services hold
    others = {k: type(v).__name__ for k, v in held.items()
              if v is not outer and k not in OWN_LAYERS}
    assert others == {}, f"services holding another store than brain.store: {others}"
    assert brain.memory.store is outer
    assert {id(brain.model_switch.tracked)} == {id(x) for x in layers
                                                if type(x).__name__ == "TrackedStore"}


def test_a_model_switch_moves_the_tracking_layer_and_replaces_no_layer(
        settings: Settings, _empty_shard: Path) -> None:
    """The swap tells the TrackedStore which generation to serve: the layers above it stay the
    same objects, and every service still holds the one outermost store."""
    from tests.generations.test_generations import Permuted, _open, _target

    new = Permuted()
    b = _open(settings, new, _empty_shard)
    try:
        b.memory.add("a note about the store stack", None)
        before = layers_of(b.store)
        b.model_switch.switch(_target(new))
        b.model_switch.wait(60)
        assert b.meta.model == new.record.id
        after = layers_of(b.store)
        assert [id(x) for x in after[:3]] == [id(x) for x in before[:3]]
        assert after[-1] is not before[-1]  # the new generation, under the same layers
        assert b.store.manifest.location != str(before[-1].path.relative_to(b.home))  # type: ignore[attr-defined]
        held = {(n, w): s for n, svc in _services(b).items() for w, s in _stores_held(svc)}
        assert {k for k, v in held.items() if v is not b.store} <= OWN_LAYERS
    finally:
        b.close()


def test_the_stack_stamps_a_running_requests_notes_without_an_installer(brain: Brain) -> None:
    """Request stamping is a layer the composition root builds in: a note written while a
    forwarded call runs carries its id (so a retry can ask whether it was applied); one
    written outside a call carries none."""
    from brain.process.owner import find_request
    from brain.store.stamping import REQUEST_FIELD, current_request

    token = current_request.set("req-0001")
    try:
        stamped = brain.memory.add("a note written by a forwarded call", None).note["zk_id"]
    finally:
        current_request.reset(token)
    plain = brain.memory.add("a note written by the owner itself", None).note["zk_id"]
    found = find_request(brain, "req-0001")
    assert found is not None and found["zk_id"] == stamped
    assert find_request(brain, "req-0002") is None
    stored = {p.payload["zk_id"]: p.payload for p in brain.store.scroll(None, limit=50)[0]
              if p.payload.get("kind") == "note"}
    assert stored[stamped][REQUEST_FIELD] == "req-0001"
    assert REQUEST_FIELD not in stored[plain]


def test_functions_that_read_the_backends_files_see_through_the_stack(brain: Any) -> None:
    """store_bytes and the start checks read the embedded shard's path: through the layers
    (a pass-through attribute used to reach it; explicit delegation must not hide it)."""
    from brain.store.integrity import store_bytes, store_location

    brain.memory.add("a note so the shard has files", project="p")
    assert store_bytes(brain.store) > 0
    assert store_location(brain.store, brain.home) is not None
