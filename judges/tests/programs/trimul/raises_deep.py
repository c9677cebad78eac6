"""A candidate that fails the way real ones do: deep in its own helpers, an error raised while
handling another. Expected verdict Runtime Error whose message starts with the exception's type
and text, names the error it was raised from, and ends with this file's frames (`_project`,
`_contract`), none of the judge's worker."""


def _project(shapes):
    try:
        return shapes["left_projection"]
    except KeyError as missing:
        raise ValueError(f"no weight for the left projection among {sorted(shapes)[:2]}") from (
            missing
        )


def _contract(w):
    return _project(w)


def custom_kernel(data):
    return _contract(data[2])
