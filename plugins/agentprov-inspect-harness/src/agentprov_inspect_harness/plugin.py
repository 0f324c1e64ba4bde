"""The plugin's hooks: the ``inspect.eval`` mapper, by reference (its code is imported when
it first maps)."""

from agentprov_core.api import MapperRef, hookimpl

#: the evidence format a source names (``SourceMeta.evidence_format``) when its live
#: evidence is an Inspect ``.eval`` log with the wire log beside it
EVAL_FORMAT = "inspect-eval"

EVAL_MAPPER = MapperRef(name="inspect.eval", version="0.1.0", evidence_formats=(EVAL_FORMAT,),
                        target="agentprov_inspect_harness.eval_mapper:MAPPER")


@hookimpl
def agentprov_mappers():
    """``inspect.eval``: an Inspect cell's ``.eval`` log (and the wire log beside it)."""
    return [EVAL_MAPPER]
