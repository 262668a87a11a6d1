"""The slips of issue 41 stay fixed: read, not run.

Every lesson notebook (both twins), every quiz bank and assignment 3's model answer are read
as text. A slip is a wrong statement the course once made; the test fails if its wording
is back, and checks the corrected statement where that is cheap (a worked example
recomputed, a section number looked up, a figure compared with the assert that checks it,
the library behaviour a lesson describes asked of the pinned library). Years of the papers
the course cites in several places must agree everywhere.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
from fractions import Fraction
from pathlib import Path

import nbformat
import pytest
import yaml

from tools.notebook_runner import ROOT
from tools.sync_notebooks import lessons

FRAMEWORKS = ("pytorch", "tensorflow")
CHECKS_TAG = "checks"


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _notebook(path: Path):
    return nbformat.read(path, as_version=4)


def _lesson_nb(lesson: str, fw: str):
    return _notebook(ROOT / "lessons" / lesson / f"{lesson}_{fw}.ipynb")


def _cells_text(nb, kind: str | None = None) -> str:
    return _squash("\n\n".join(c.source for c in nb.cells if kind in (None, c.cell_type)))


def course_texts() -> dict[str, str]:
    """What the slips are searched in: every lesson (both twins), every quiz bank,
    assignment 3's model answer; whitespace squashed, so a line break changes nothing."""
    texts = {}
    for lesson in lessons():
        for fw in FRAMEWORKS:
            texts[f"lessons/{lesson}_{fw}"] = _cells_text(_lesson_nb(lesson, fw))
    for bank in sorted((ROOT / "quizzes").glob("*.yml")):
        texts[f"quizzes/{bank.name}"] = _squash(bank.read_text(encoding="utf-8"))
    for fw in FRAMEWORKS:
        sid = f"03_memory_networks_{fw}"
        texts[f"solutions/{sid} (markdown)"] = _cells_text(
            _notebook(ROOT / "solutions" / sid / f"{sid}.ipynb"), "markdown")
    return texts


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return course_texts()


# (issue 41 slip number, where: a prefix of the text's name, the wrong wording, the original text it was)
SLIPS = [
    (1, "lessons/02_", r"paper's \$W\[s; h\]\$", "($s W_q + h W_k$ is the paper's $W[s; h]$ split into its two halves"),
    (2, "lessons/02_", r"different widths without a projection",
     "additive scoring can compare vectors of different widths without a projection"),
    (3, "lessons/02_", r'"""One GRU step \(Cho et al\., 2014\)\. Shapes',
     '"""One GRU step (Cho et al., 2014). Shapes: x (B, D_in), h (B, G) -> new h (B, G)."""'),
    (4, "lessons/03_", r"l_\{21\} = 0 - \(1/2\)\(1 - 2\)", "$l_{21} = 0 - (1/2)(1 - 2) = 0.5$"),
    (5, "lessons/03_", r"as the authors' code clips each weight matrix|\(the authors' code clips each weight matrix\)",
     "(the embeddings, the temporal vectors), as the authors' code clips each weight matrix: one norm"),
    (6, "lessons/03_", r"they are all differentiable; the sort only reorders",
     "(they are all differentiable; the sort only reorders)"),
    (7, "lessons/05_", r"equals `torch\.nn\.MultiheadAttention` and `keras\.layers\.MultiHeadAttention`",
     "the layer equals `torch.nn.MultiheadAttention` and `keras.layers.MultiHeadAttention` to 1e-5"),
    (8, "lessons/05_self_attention_tensorflow", r"\bfused_attention\b|\"fused dot_product_attention\"|the fused kernel computes the same",
     'def fused_attention(q, k, v): assert ..., "the fused kernel computes the same attention"'),
    (9, "lessons/06_", r"introduces the label smoothing of section 4",
     "Its §7 introduces the label smoothing of section 4."),
    (9, "quizzes/06_", r"another convention some libraries use",
     "$0.1 / V$ on every token is another convention some libraries use"),
    (10, "lessons/07_", r"so NSP mostly teaches topic matching",
     "a random B usually comes from another document, so NSP mostly teaches topic matching"),
    (10, "quizzes/07_", r"NSP mostly taught topic matching",
     "did as well or better: NSP mostly taught topic matching."),
    (12, "lessons/08_", r"costs \$O\(n\^2\)\$ in all", "writing $n$ pieces costs $O(n^2)$ in all."),
    (13, "lessons/09_", r"Algorithm 1 is section 2's loop", "Its Algorithm 1 is section 2's loop;"),
    (16, "lessons/06_", r"Post-LN sits in between", "much more slowly. Post-LN sits in between."),
    (16, "lessons/06_", r"usually adds about a BLEU point", "it usually adds about a BLEU point"),
    (16, "lessons/08_", r"gains about a tenth of a bit", "Kneser-Ney smoothing ... gains about a tenth of a bit more."),
    (16, "lessons/09_", r"longer lists do not trouble it", "and longer lists do not trouble it."),
    (16, "lessons/07_", r"reference to about 1e-6", "name map and match the reference to about 1e-6."),
    (16, "lessons/02_", r"differ by one to four points", "the two exact matches differ by one to four points"),
    (16, "lessons/04_", r"0\.10 to 0\.20|0\.6 and 1\.0", "(0.10 to 0.20 in our runs) ... (between about 0.6 and 1.0"),
    (16, "quizzes/03_", r"near 26% on every seed", "The lesson's runs end near 26% on every seed."),
    (17, "lessons/05_self_attention_pytorch", r"on a GPU it never even stores the full matrix",
     "(on a GPU it never even stores the full matrix: the FlashAttention idea)"),
]


def slips_in(texts: dict[str, str]) -> list[str]:
    """Each slip whose wrong wording is in a text it applies to, with where."""
    return [f"slip {n} in {name}: {m.group()!r}"
            for n, where, wrong, _ in SLIPS for name, text in texts.items() if name.startswith(where)
            for m in [re.search(wrong, text)] if m]


def test_no_slip_is_back(texts) -> None:
    found = slips_in(texts)
    assert not found, "issue 41's slips are back:\n" + "\n".join(found)


def test_each_slip_check_catches_the_wording_it_was_written_for() -> None:
    for n, where, _, original in SLIPS:
        assert slips_in({where + " (as it was)": _squash(original)}), f"slip {n}: the check misses {original!r}"


def test_every_slip_check_reads_something(texts) -> None:
    for n, where, _, _ in SLIPS:
        assert any(name.startswith(where) for name in texts), f"slip {n}: nothing in the course is named {where!r}"


def _both(texts, lesson_prefix: str) -> list[tuple[str, str]]:
    got = [(name, text) for name, text in texts.items() if name.startswith(f"lessons/{lesson_prefix}")]
    assert len(got) == 2, f"expected both twins of {lesson_prefix}, got {[n for n, _ in got]}"
    return got


# The corrected statements, in both twins (checked where a short phrase says it).
RIGHT = [
    ("02_", [r"v_a\^\\top \\tanh\(W_a s_\{i-1\} \+ U_a h_j\)", r"\*concat\*", r"reset_after=True",
             r"\(r \\odot h\) W_\{hn\}", r"Only \*dot\* needs"]),
    ("03_", [r"l_\{12\} = 0 - \(1/2\)\(1 - 2\)", r"spectral norm", r"ignores these discontinuities"]),
    ("06_", [r"\\epsilon / K\$ on every one of the \$K\$ classes", r"`<bos>`", r"Annotated Transformer's `LabelSmoothing`"]),
    ("07_", [r"ALBERT \(Lan et al\., 2020\) gave a reason", r"removing NSP did not hurt"]),
    ("08_", [r"O\(n\^3 L D\)"]),
    ("09_", [r"key/value blocks outside, query blocks inside"]),
]


@pytest.mark.parametrize("lesson_prefix, phrases", RIGHT, ids=[p for p, _ in RIGHT])
def test_the_corrected_statement_is_there(texts, lesson_prefix, phrases) -> None:
    for name, text in _both(texts, lesson_prefix):
        missing = [p for p in phrases if not re.search(p, text)]
        assert not missing, f"{name}: the corrected statement is missing: {missing}"


def test_position_encoding_worked_example_matches_the_formula(texts) -> None:
    """Slip 4: every worked l_{kj} of lesson 3 (k the dimension, j the word, J = D = 2)
    is the value l_kj = (1 - j/J) - (k/D)(1 - 2j/J) gives, and its worked expression uses
    the k and j of its own label."""
    J = D = 2
    for name, text in _both(texts, "03_"):
        worked = re.findall(r"l_\{(\d)(\d)\} = ([^=$]+?) = ([\d.]+)", text)
        assert worked, f"{name}: no worked example l_{{kj}} = ... = value found"
        for k, j, expr, value in worked:
            k, j = int(k), int(j)
            want = (1 - Fraction(j, J)) - Fraction(k, D) * (1 - Fraction(2 * j, J))
            assert Fraction(value) == want, f"{name}: l_{k}{j} = {value}, the formula gives {want}"
            factor = re.search(r"\((\d)/(\d)\)\(1 - (\d)", expr)
            assert factor and Fraction(int(factor[1]), int(factor[2])) == Fraction(k, D), (
                f"{name}: l_{k}{j}'s worked expression {expr!r} does not use k/D = {k}/{D}")
        stated = dict(((int(k), int(j)), Fraction(v)) for k, j, v in re.findall(r"l_\{(\d)(\d)\} = ([\d.]+)\$", text))
        for (k, j), v in stated.items():
            assert v == (1 - Fraction(j, J)) - Fraction(k, D) * (1 - Fraction(2 * j, J)), f"{name}: l_{k}{j} = {v} is wrong"


def test_lesson_3_clipping_agrees_with_the_benchmark_record(texts) -> None:
    """Slip 5: the record says how the authors' code clips; the lesson says the same."""
    record = _squash((ROOT / "benchmarks" / "results" / "memn2n.md").read_text(encoding="utf-8"))
    assert "spectral norm" in record and "Frobenius" in record, "benchmarks/results/memn2n.md no longer says how the authors clip"
    for name, text in _both(texts, "03_"):
        assert "spectral norm" in text and "Frobenius norm" in text, f"{name}: the clipping is not described as the record does"


def _section_of(nb, phrase: str) -> str:
    """The '## N. Title' heading of the section whose text holds phrase."""
    heading = None
    for cell in nb.cells:
        at = cell.source.find(phrase)  # headings after the phrase in the same cell do not count
        if cell.cell_type == "markdown":
            for line in cell.source[: at if at >= 0 else None].splitlines():
                if re.match(r"^## \d+\. ", line):
                    heading = line[3:].strip()
        if at >= 0:
            assert heading, f"{phrase!r} sits before the first numbered section"
            return heading
    raise AssertionError(f"{phrase!r} is not in the notebook")


def test_lesson_8_points_to_lesson_6s_bpe_section(texts) -> None:
    """Slip 11: 'lesson 6, section N' for byte-pair pieces names the section that teaches BPE."""
    for fw in FRAMEWORKS:
        bpe = _section_of(_lesson_nb("06_transformer", fw), "Byte-pair encoding (BPE")
        number = bpe.split(".")[0]
        text = texts[f"lessons/08_gpt_{fw}"]
        cited = re.findall(r"byte-pair pieces\*\* \(lesson 6, section (\d+)\)", text)
        assert cited == [number], f"08_gpt_{fw}: BPE is cited as lesson 6, section {cited}; it is section {bpe!r}"


def test_quiz_07_sends_nsp_to_the_section_that_teaches_it() -> None:
    """Slip 10: the NSP question's 'section:' is the lesson section that explains NSP."""
    bank = yaml.safe_load((ROOT / "quizzes" / "07_bert.yml").read_text(encoding="utf-8"))
    question = next(q for part in ("pre", "post") for q in bank.get(part, []) if q["id"] == "post-nsp")
    for fw in FRAMEWORKS:
        assert question["section"] == _section_of(_lesson_nb("07_bert", fw), "**Next-sentence prediction (NSP).**")


def test_lesson_5_summary_names_only_the_library_its_twin_checks(texts) -> None:
    """Slip 7: each twin's summary claims equality with the library layer it compares with."""
    own = {"pytorch": "torch.nn.MultiheadAttention", "tensorflow": "keras.layers.MultiHeadAttention"}
    for fw, library in own.items():
        text = texts[f"lessons/05_self_attention_{fw}"]
        claim = re.search(r"the layer equals `([\w.]+)`", text)
        assert claim and claim[1] == library, f"05_self_attention_{fw}: the summary says the layer equals {claim and claim[1]}"
        nb = _lesson_nb("05_self_attention", fw)
        code = _cells_text(nb, "code")
        assert re.search(rf"should equal {re.escape(library)} to 1e-5", code), f"05_self_attention_{fw}: no check against {library}"


def _checks_cell(nb) -> str:
    tagged = [c.source for c in nb.cells if CHECKS_TAG in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "expected one checks cell"
    return tagged[0]


def test_quiz_05_winograd_figures_are_the_ones_the_lesson_asserts() -> None:
    """Slip 16: the attention weights quiz 05 quotes are asserted in lesson 5's checks cell."""
    bank = yaml.safe_load((ROOT / "quizzes" / "05_self_attention.yml").read_text(encoding="utf-8"))
    question = next(q for part in ("pre", "post") for q in bank.get(part, []) if q["id"] == "post-winograd")
    right = next(a for a in question["answers"] if a.get("correct"))
    quoted = re.findall(r"(0\.\d\d) against (0\.\d\d) with (\w+)", right["explain"])
    assert len(quoted) == 2, f"quiz 05 post-winograd: expected two 'a against b with word' figures, got {quoted}"
    for fw in FRAMEWORKS:
        tree = ast.parse(_checks_cell(_lesson_nb("05_self_attention", fw)))
        asserted = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Tuple) and len(node.elts) == 3 and isinstance(node.elts[0], ast.Constant) \
                    and isinstance(node.elts[2], ast.Tuple):
                asserted[node.elts[0].value] = tuple(ast.literal_eval(node.elts[2]))
        for animal, street, word in quoted:
            assert asserted.get(word) == (float(animal), float(street)), (
                f"05_self_attention_{fw}: the checks cell asserts {asserted.get(word)} for {word!r}, the quiz quotes {(animal, street)}")


def test_lesson_5_names_the_kernel_the_pinned_torch_picks_on_a_cpu(texts) -> None:
    """Slip 17: the PyTorch twin says torch's SDPA runs FlashAttention on a CPU too; ask the
    installed torch for the lesson's shapes (B = 4, H = 8, Dh = 32, no mask)."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend

    assert "`FLASH_ATTENTION` on a CPU too" in texts["lessons/05_self_attention_pytorch"]
    for length in (16, 256):
        q, k, v = torch.randn(3, 4, 8, length, 32).unbind(0)
        with torch.no_grad():
            assert SDPBackend(torch._fused_sdp_choice(q, k, v)) == SDPBackend.FLASH_ATTENTION, (
                f"torch {torch.__version__} no longer picks FLASH_ATTENTION on a CPU (T = {length}): update lesson 5, section 5")


def test_lesson_5_tensorflow_says_what_keras_dot_product_attention_is(texts) -> None:
    """Slip 8: the TensorFlow twin says keras.ops.dot_product_attention is not a fused kernel
    there and that flash_attention=True raises. Read the installed Keras's TensorFlow backend
    (no import): it raises for flash attention and computes einsum, softmax, einsum."""
    text = texts["lessons/05_self_attention_tensorflow"]
    assert "is not a fused kernel" in text and "`flash_attention=True` raises an error there" in text
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("keras is not installed")
    source = Path(next(iter(spec.submodule_search_locations))) / "src" / "backend" / "tensorflow" / "nn.py"
    functions = {node.name: node for node in ast.parse(source.read_text(encoding="utf-8")).body
                 if isinstance(node, ast.FunctionDef)}
    public = ast.unparse(functions["dot_product_attention"])
    assert re.search(r"if flash_attention:\s+raise ValueError", public), "Keras's TensorFlow backend now has flash attention"
    called = {ast.unparse(n.func) for name in ("dot_product_attention", "_dot_product_attention_xla") if name in functions
              for n in ast.walk(functions[name]) if isinstance(n, ast.Call)}
    assert {"tf.einsum", "tf.nn.softmax"} <= called, f"Keras's TensorFlow attention no longer runs einsum and softmax: {sorted(called)}"


def test_no_control_character_in_markdown() -> None:
    """Slip 15: a '\\t' written into a notebook's JSON as a TAB turned $u^\\top$ into 'u^  op'."""
    paths = [p for d in ("lessons", "solutions", "assignments") for p in sorted((ROOT / d).glob("*/*.ipynb"))]
    assert paths
    bad = [f"{p.relative_to(ROOT)} cell {i}" for p in paths for i, c in enumerate(_notebook(p).cells)
           if c.cell_type == "markdown" and re.search(r"[\t\x07\x08\x0b\x0c]", c.source)]
    assert not bad, f"control characters (a TAB where \\t was meant?) in markdown: {bad}"
    for fw in FRAMEWORKS:
        sid = f"03_memory_networks_{fw}"
        answer = _cells_text(_notebook(ROOT / "solutions" / sid / f"{sid}.ipynb"), "markdown")
        assert "$u^\\top T_A(i)$" in answer, f"{sid}: the model answer lost its $u^\\top T_A(i)$"


# Papers the course cites in several places, and the year of the venue it cites them by.
YEARS = {
    "Devlin et al., BERT (NAACL)": (r"Devlin(?: et al\.?| and)?[^()\d]{0,40}?\(?((?:19|20)\d\d)", "2019"),
    "Sennrich et al., BPE (ACL)": (r"Sennrich(?:, Haddow and Birch| et al\.?)[^()\d]{0,20}?\(?((?:19|20)\d\d)", "2016"),
    "Press et al., ALiBi (ICLR)": (r"Press(?:, Smith and Lewis| et al\.?)[^()\d]{0,20}?\(?((?:19|20)\d\d)", "2022"),
    "Lan et al., ALBERT (ICLR)": (r"Lan et al\.?[^()\d]{0,20}?\(?((?:19|20)\d\d)", "2020"),
}
YEAR_DIRS = ("lessons", "quizzes", "solutions", "assignments", "docs", "utils", "benchmarks")


def year_texts() -> dict[str, str]:
    files = [p for d in YEAR_DIRS for p in sorted((ROOT / d).rglob("*")) if p.suffix in (".ipynb", ".yml", ".md", ".py")]
    files += [p for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md") if p.exists()]
    out = {}
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        if p.suffix == ".ipynb":
            text = "\n\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                               for c in json.loads(text)["cells"])
        out[str(p.relative_to(ROOT))] = _squash(text)
    return out


def cited_years(texts: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """For each paper: year -> the files that cite it with that year."""
    found: dict[str, dict[str, list[str]]] = {paper: {} for paper in YEARS}
    for paper, (pattern, _) in YEARS.items():
        for name, text in texts.items():
            for year in re.findall(pattern, text):
                found[paper].setdefault(year, []).append(name)
    return found


def test_each_paper_has_one_year_across_the_course() -> None:
    found = cited_years(year_texts())
    for paper, (_, year) in YEARS.items():
        assert found[paper], f"{paper}: cited nowhere; the pattern no longer finds it"
        assert set(found[paper]) == {year}, f"{paper}: cited as {found[paper]} (expected {year} everywhere)"


def test_the_year_check_sees_a_stray_year() -> None:
    found = cited_years({"a": "BERT (Devlin et al., 2019)", "b": "* Devlin et al. (2018). *BERT",
                         "c": "Press and Wolf (2016) and Press, Smith and Lewis (2021)."})
    assert found["Devlin et al., BERT (NAACL)"] == {"2019": ["a"], "2018": ["b"]}
    assert found["Press et al., ALiBi (ICLR)"] == {"2021": ["c"]}, "Press and Wolf (2016) is another paper"
