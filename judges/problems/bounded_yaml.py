"""YAML read with its aliases bounded: a problem's config.yaml (and a GPU package's cases file).

`yaml.safe_load` shares an anchored value between its aliases, so a "billion laughs" document
(nine levels of ten aliases each) loads at once, as a graph of a few dozen nodes, and expands
to 10⁹ values only when something walks it (a check, a copy, a fingerprint): minutes, then a
MemoryError. Here the document's node graph is measured before anything is built: the values
it expands to, counting every alias as the copy it stands for, must be at most `NODE_LIMIT`,
and an alias inside its own anchor (a recursive document) is refused. Deep nesting that the
YAML parser itself cannot follow is refused too. Each refusal is one line naming the file.
"""

from __future__ import annotations

from typing import Any

import yaml

#: The most values a document may expand to, aliases counted as copies. A config.yaml holds
#: tens; the largest shipped file holds a few thousand.
NODE_LIMIT = 100_000


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
