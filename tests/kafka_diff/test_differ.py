"""The differ of the differential check (differ.py), without a broker: leaves compared by
path, list elements paired by their names, and the doc's rows, `*`s included, judging what
is seen (it runs in the default suite; the check itself is `just test-kafka`)."""

from __future__ import annotations

from pathlib import Path

from .differ import DOC_SECTION, Difference, Known, differences, judge, known_differences


def test_differences_are_leaves_by_path_and_named_elements() -> None:
    kafka = {"a": {"error": "none", "topics": [{"name": "t", "n": 1}, {"name": "u", "n": 2}]}}
    ours = {"a": {"error": "none", "topics": [{"name": "u", "n": 2}, {"name": "t", "n": 3}]}}
    ours["b"] = 1  # type: ignore[assignment]
    assert differences("s", kafka, ours) == [
        Difference("s", "a.topics[name=t].n", "1", "3"),
        Difference("s", "b", "absent", "1"),
    ]


def test_rows_with_stars_cover_families_and_are_judged(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        f"# x\n\n{DOC_SECTION}\n\n| scenario | path | Kafka | ours | status |\n| --- |\n"
        "| `s` | `api_keys.*` | `*` | `absent` | kept: not served |\n"
        "| `s` | `gone` | `1` | `2` | kept: was different |\n"
        "| `s` | `back` | `1` | `2` | fixed |\n"
        '| `s` | `` `q` `` | `"a\\|b"` | `null` | kept: quoted |\n'
        "\n## next\n| `s` | `ignored` | `1` | `2` | kept: another section |\n"
    )
    rows = known_differences(doc)
    assert [r.difference.path for r in rows] == ["api_keys.*", "gone", "back", "`q`"]
    seen = [
        Difference("s", "api_keys.elect_leaders", '"0-2"', "absent"),
        Difference("s", "api_keys.fetch", '"4-18"', '"4-16"'),  # not absent: new
        Difference("s", "back", "1", "2"),
        Difference("s", "`q`", '"a|b"', "null"),
    ]
    verdict = judge("s", seen, rows)
    assert verdict.new == [seen[1]]
    assert [k.difference.path for k in verdict.gone] == ["gone"]
    assert [k.difference.path for k in verdict.back] == ["back"]
    assert not verdict.matches
    assert Known(Difference("t", "*", "*", "*"), "kept").covers(seen[0]) is False  # scenario
