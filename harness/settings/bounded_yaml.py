"""YAML read with its aliases bounded: `serve.yaml`, `serve-frozen.yaml` and a run's own copy.

`yaml.safe_load` shares an anchored value between its aliases, so a "billion laughs" document
(nine levels of ten aliases each) loads at once, as a graph of a few dozen nodes, and expands
to 10⁹ values only when something walks it (the environment expansion, a validation, a copy):
minutes, then a MemoryError. Here the document's node graph is measured before anything is
built: the values it expands to, counting every alias as the copy it stands for, must be at
most `NODE_LIMIT`, and an alias inside its own anchor (a recursive document) is refused. Deep
nesting that the YAML parser itself cannot follow is refused too, and so is a file over
`SIZE_LIMIT` bytes. Each refusal is one line naming the file. (The judge, deployed alone, has
its own copy of these rules: judges/problems/bounded_yaml.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: The most values a document may expand to, aliases counted as copies. The shipped serve.yaml
#: holds a few hundred.
NODE_LIMIT = 100_000
#: The largest settings file read (the shipped serve.yaml is about 20 KiB).
SIZE_LIMIT = 1 << 20


class YamlRefused(ValueError):
    """The document is not valid YAML, or expands past `NODE_LIMIT` or without end."""


def _expanded_size(root: yaml.Node, where: str) -> int:
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            active.discard(key)
            if sizes[key] > NODE_LIMIT:
                raise YamlRefused(
                    f"{where}: expands to more than {NODE_LIMIT} values through aliases "
                    "(*name); write the values out, or use fewer aliases"
                )
            continue
        if key in sizes:
            continue
        if key in active:
            raise YamlRefused(f"{where}: an alias refers to a value that contains it")
        active.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def read(path: Path) -> Any:
    """The YAML file at `path`, at most `SIZE_LIMIT` bytes, read by `load`; OSError when it
    cannot be read, YamlRefused otherwise."""
    with open(path, "rb") as file:
        data = file.read(SIZE_LIMIT + 1)
    if len(data) > SIZE_LIMIT:
        raise YamlRefused(f"{path}: over {SIZE_LIMIT >> 20} MiB; a settings file is smaller")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise YamlRefused(f"{path}: not UTF-8 ({error.reason})") from None
    return load(text, str(path))


def load(text: str, where: str) -> Any:
    """`text` as `yaml.safe_load` reads it, after the bound above; YamlRefused naming `where`
    when it is not YAML or is refused."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, where)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise YamlRefused(f"{where}: not valid YAML ({' '.join(str(error).split())})") from None
    except RecursionError:
        raise YamlRefused(f"{where}: nested too deeply to read") from None
    finally:
        loader.dispose()
