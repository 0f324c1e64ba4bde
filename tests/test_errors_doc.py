"""docs/reference/errors.md is generated from the one error registry."""

from conftest import ROOT

from agentprov_core import errors
from agentprov_core.exitcodes import Exit


def test_errors_reference_is_current():
    page = (ROOT / "docs" / "reference" / "errors.md").read_text()
    assert page == errors.reference_markdown(), (
        "regenerate: python -m agentprov_core.errors > docs/reference/errors.md")


def test_every_code_has_a_documented_exit_and_renders():
    assert {int(e) for e in Exit} == {0, 1, 2, 3, 4, 5, 70, 130}
    for spec in errors.REGISTRY.values():
        assert spec.exit in (Exit.USAGE, Exit.ENVIRONMENT, Exit.REFUSED, Exit.UNSUPPORTED)
        assert spec.fix
        if spec.style == "usage":
            assert spec.exit == Exit.USAGE
