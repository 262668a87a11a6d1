"""utils.grading messages, utils.quiz validation and feedback, utils.runtime, utils.plots."""
from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from utils import grading, plots, quiz, runtime  # noqa: E402
from utils.attention import numpy_ref as R  # noqa: E402

# ---------------------------------------------------------------- grading


def test_check_close_names_the_known_mistake() -> None:
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 3, 16)), rng.normal(size=(2, 5, 16))
    right = R.masked_softmax(R.dot_scores(q, k))
    unscaled = R.masked_softmax(R.dot_scores(q, k, scale=False))
    with pytest.raises(grading.GradingError, match="They match what you get when the scores are not scaled"):
        grading.check_close(unscaled, right, "weights", mistakes={"the scores are not scaled": unscaled})
    with pytest.raises(grading.GradingError, match=r"weights: values differ from the reference by up to .* \(at index"):
        grading.check_close(right + 0.1, right, "weights", mistakes={"the scores are not scaled": unscaled})
    grading.check_close(right, right, "weights")  # passes silently


def test_check_close_points_at_the_real_difference_when_both_have_the_same_infinity() -> None:
    """-inf in both (a hidden key's log-weight) is no difference: the message names the entry that differs."""
    expected = np.array([[-np.inf, -0.01, -150.0]])
    got = np.array([[-np.inf, -0.01, -np.inf]])
    with pytest.raises(grading.GradingError, match=r"up to inf \(at index \(0, 2\): expected -150, got -inf\)"):
        grading.check_close(got, expected, "log-weights")
    grading.check_close(expected.copy(), expected, "log-weights")  # the same infinities pass


def test_a_hint_is_shown_only_for_the_mistake_it_names() -> None:
    """A value that matches no listed mistake gets the numbers, never a guess; the hint goes with a wrong shape."""
    right = np.array([[0.2, 0.8]])
    with pytest.raises(grading.GradingError) as info:
        grading.check_close(right + 0.1, right, "weights", hint="transpose only the last two axes")
    assert "Hint" not in str(info.value) and "transpose" not in str(info.value)
    with pytest.raises(grading.GradingError, match="Hint: transpose only the last two axes"):
        grading.check_close(right.T, right, "weights", hint="transpose only the last two axes")


def test_a_test_that_does_not_exercise_its_claim_says_so_and_perturb_moves_every_weight() -> None:
    with pytest.raises(grading.SetupError, match="test set-up: the mask hides no key"):
        grading.assert_setup(np.ones(3, bool).all() is False, "the mask hides no key")
    grading.assert_setup(True, "never shown")
    torch = pytest.importorskip("torch")
    norm = torch.nn.LayerNorm(4)
    grading.perturb(norm, seed=0)
    assert not torch.allclose(norm.weight, torch.ones(4)) and not torch.allclose(norm.bias, torch.zeros(4))


def test_check_shape_and_nan_messages() -> None:
    with pytest.raises(grading.GradingError, match=r"out: expected shape \(2, 3\), got \(3, 2\)"):
        grading.check_shape(np.zeros((3, 2)), (2, 3), "out")
    bad = np.array([[0.5, np.nan]])
    with pytest.raises(grading.GradingError, match="contains NaN"):
        grading.check_close(bad, np.array([[0.5, 0.5]]), "w")


def test_rows_and_mask_checks_explain() -> None:
    with pytest.raises(grading.GradingError, match="last axis"):
        grading.check_rows_sum_to_one(np.full((2, 3), 0.5), "w")
    mask = np.array([[True, True, False, False]])
    inverted = R.masked_softmax(np.zeros((1, 4)), ~mask)
    with pytest.raises(grading.GradingError, match="inverted"):
        grading.check_zero_where_masked(inverted, mask, "w")
    grading.check_zero_where_masked(R.masked_softmax(np.zeros((1, 4)), mask), mask, "w")


def test_run_student_turns_errors_into_messages() -> None:
    def todo(x):
        raise NotImplementedError()

    def forgot_return(x):
        x + 1

    def broken(x):
        return x.nope

    with pytest.raises(grading.GradingError, match="not implemented yet"):
        grading.run_student(todo, 1)
    with pytest.raises(grading.GradingError, match="return"):
        grading.run_student(forgot_return, 1)
    with pytest.raises(grading.GradingError, match="raised AttributeError"):
        grading.run_student(broken, 1)
    assert grading.run_student(lambda x: x + 1, 1) == 2


def test_check_own_code_spots_shortcuts() -> None:
    def lazy(q, k, v):
        return utils.attention.torch_impl.scaled_dot_product_attention(q, k, v)  # noqa: F821

    def honest(q, k, v):
        return q @ k

    with pytest.raises(grading.GradingError, match="write it yourself"):
        grading.check_own_code(lazy, ["utils"])
    grading.check_own_code(honest, ["utils"])


def test_to_numpy_handles_frameworks() -> None:
    import torch

    assert grading.to_numpy(torch.ones(2, requires_grad=True)).tolist() == [1.0, 1.0]
    assert grading.to_numpy([1, 2]).tolist() == [1, 2]


# ---------------------------------------------------------------- quiz


def _bank(**over):
    q = {"id": "q1", "question": "Why?", "answers": [
        {"text": "A", "correct": True, "explain": "because"}, {"text": "B", "explain": "no"}]}
    bank = {"lesson": "x", "title": "X", "pre": [q], "post": [{**q, "id": "q2"}]}
    bank.update(over)
    return bank


def test_every_committed_bank_validates() -> None:
    banks = sorted(quiz.quiz_dir().glob("*.yml"))
    assert banks, "no quiz banks found"
    for path in banks:
        bank = quiz.load_bank(path.stem)
        assert bank.parts["pre"] and bank.parts["post"]


def test_every_lesson_has_a_bank_used_by_both_notebooks() -> None:
    root = Path(__file__).resolve().parent.parent
    for lesson in sorted(p for p in (root / "lessons").iterdir() if p.is_dir()):
        assert (quiz.quiz_dir() / f"{lesson.name}.yml").exists(), f"{lesson.name}: no quiz bank"
        for nb in lesson.glob("*.ipynb"):
            text = nb.read_text()
            for part in ("pre", "post"):
                assert f'quiz.show(\\"{lesson.name}\\", \\"{part}\\")' in text, f"{nb.name}: no {part}-lesson quiz"


@pytest.mark.parametrize("change,message", [
    (lambda b: b["post"][0].update(id="q1"), "id 'q1' is used twice"),
    (lambda b: b["pre"][0]["answers"][1].update(correct=True), "exactly one correct answer"),
    (lambda b: b["pre"][0]["answers"][0].pop("explain"), "explain"),
    (lambda b: b["pre"][0].update(colour="red"), "unknown keys"),
    (lambda b: b.update(post=[]), "non-empty list 'post'"),
    (lambda b: b["pre"][0].update(multiple=True, answers=[{"text": "A", "explain": "a"}, {"text": "B", "explain": "b"}]), "marks no answer correct"),
])
def test_bank_validation_names_the_problem(change, message) -> None:
    bank = _bank()
    change(bank)
    with pytest.raises(quiz.QuizError, match=message):
        quiz.parse_bank(bank, "test.yml")


def test_question_feedback() -> None:
    bank = quiz.parse_bank(_bank(), "t")
    q = bank.parts["pre"][0]
    ok, text = q.check([0])
    assert ok and "because" in text
    ok, text = q.check([1])
    assert not ok and "no" in text
    assert q.check([])[0] is False


def test_quiz_widget_checks_answers() -> None:
    box = quiz.show("01_soft_attention", "pre")
    items = box.children[1:-1]
    first = items[0]
    shown = first._course_question  # options in display (shuffled) order
    assert shown.id == quiz.load_bank("01_soft_attention").parts["pre"][0].id
    first._course_select[min(shown.correct_set)].value = True  # the tick box of the right option
    first._course_check(None)
    assert "Correct" in first.children[-1].value
    assert "Score: 1 /" in box.children[-1].value


# ---------------------------------------------------------------- runtime


def test_profile_from_environment(monkeypatch) -> None:
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    assert runtime.profile().pick(smoke=1, cpu=2, gpu=3) == 1
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    assert runtime.profile().pick(smoke=1, cpu=2, gpu=3) == 2
    monkeypatch.setenv("COURSE_PROFILE", "gpu")
    assert runtime.profile().pick(smoke=1, cpu=2) == 2  # gpu falls back to cpu sizes
    monkeypatch.setenv("COURSE_PROFILE", "fast")
    with pytest.raises(ValueError, match="COURSE_PROFILE: expected one of smoke, cpu, gpu"):
        runtime.profile()


def test_seed_everything_is_reproducible() -> None:
    import torch

    runtime.seed_everything(3)
    a = (np.random.rand(), torch.rand(1).item())
    runtime.seed_everything(3)
    assert (np.random.rand(), torch.rand(1).item()) == a
    with pytest.raises(ValueError, match="seed"):
        runtime.seed_everything(-1)


def test_record_writes_atomically(tmp_path, monkeypatch) -> None:
    path = tmp_path / "rec.json"
    monkeypatch.setenv("COURSE_RECORD_FILE", str(path))
    # Returns nothing: lesson cells end with record(...) and must not echo a bare Out[n] number.
    assert runtime.record("a", 1.5) is None
    runtime.record("b", 2, tol=0.1)
    data = json.loads(path.read_text())
    assert data["a"]["value"] == 1.5 and data["b"]["tol"] == 0.1
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError, match="finite"):
        runtime.record("c", float("nan"))


def test_cache_dir_follows_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "c"))
    assert runtime.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()


# ---------------------------------------------------------------- plots


def test_heatmap_checks_labels() -> None:
    w = R.masked_softmax(np.zeros((2, 3)))
    ax = plots.attention_heatmap(w, ["a", "b", "c"], ["x", "y"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="x_labels: expected 3 labels"):
        plots.attention_heatmap(w, ["a"], ["x", "y"])
    with pytest.raises(ValueError, match=r"weights: expected \(Tq, Tk\)"):
        plots.attention_heatmap(np.zeros((1, 2, 3)))


def test_attention_panels_share_one_scale_and_one_colour_bar() -> None:
    import matplotlib.pyplot as plt

    sharp = np.eye(3)
    uniform = np.full((3, 3), 1 / 3)
    axes = plots.attention_panels([sharp, uniform], ["sharp", "uniform"], x_labels=["a", "b", "c"])
    limits = {ax.images[0].get_clim() for ax in axes.flat}
    assert limits == {(0.0, 1.0)}, f"every panel should run from 0 to the largest weight of all panels: {limits}"
    fig = axes.flat[0].figure
    assert len(fig.axes) == 3, "two panels and one shared colour bar"
    assert [ax.get_title() for ax in axes.flat] == ["sharp", "uniform"]
    plt.close(fig)
    # Per-panel labels, wrapping, and a clear error for a wrong count.
    axes = plots.attention_panels([sharp] * 4, ["a", "b", "c", "d"], y_labels=[["x", "y", "z"]] * 4, ncols=2)
    assert axes.shape == (2, 2) and [t.get_text() for t in axes[1, 1].get_yticklabels()] == ["x", "y", "z"]
    plt.close(axes.flat[0].figure)
    with pytest.raises(ValueError, match="one title per panel"):
        plots.attention_panels([sharp, sharp], ["only one"])
    with pytest.raises(ValueError, match="vmax"):
        plots.attention_heatmap(sharp, vmax=0)


def test_mask_outline_draws_the_border_of_the_kept_cells() -> None:
    import matplotlib.pyplot as plt

    cases = {
        "one cell": (np.array([[0, 0], [0, 1]], bool), 4),
        "a 2 x 2 block": (np.ones((2, 2), bool), 8),  # the inner edges are not drawn
        "a band": (R.local_window_mask(np.arange(3), 3, 0), 12),  # three separate cells
        "nothing kept": (np.zeros((2, 3), bool), 0),
    }
    for name, (mask, edges) in cases.items():
        ax = plots.attention_heatmap(mask.astype(float))
        plots.mask_outline(mask, ax)
        segments = ax.collections[-1].get_segments()
        assert len(segments) == edges, f"{name}: expected {edges} edges, got {len(segments)}"
        plt.close(ax.figure)
    ax = plots.attention_heatmap(np.ones((2, 2)))
    plots.mask_outline(np.array([[0, 0], [0, 1]], bool), ax)
    corners = {tuple(p) for seg in ax.collections[-1].get_segments() for p in seg}
    assert corners == {(0.5, 0.5), (1.5, 0.5), (0.5, 1.5), (1.5, 1.5)}, "cell (1, 1) spans 0.5..1.5 on both axes"
    with pytest.raises(ValueError, match="mask: expected a \\(Tq, Tk\\) boolean"):
        plots.mask_outline(np.ones((2, 2)), ax)
    plt.close(ax.figure)


def test_training_curves_label_the_y_axis() -> None:
    import matplotlib.pyplot as plt

    ax = plots.training_curves({"train loss": [2, 1], "valid loss": [2.5, 1.5]})
    assert ax.get_ylabel() == "loss"
    ax = plots.training_curves({"train loss": [2, 1], "val exact match": [0.1, 0.5]})
    assert ax.get_ylabel() == "train loss / val exact match"
    ax = plots.training_curves({"learning rate": [1e-4, 2e-4]}, ylabel="lr")
    assert ax.get_ylabel() == "lr"
    plt.close("all")
    with pytest.raises(ValueError, match="at least one named series"):
        plots.training_curves({})


def test_every_explorer_slider_shows_its_whole_label() -> None:
    """ipywidgets cuts a long description ("temperat...") unless the style gives it room."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    from utils.attention import explorer as att_explorer
    from utils.positional import explorer as pos_explorer
    from utils.seq2seq import explorer as s2s_explorer
    from utils.transformer import explorer as tr_explorer

    rng = np.random.default_rng(0)
    att = {k: [rng.random((1, 2, 3, 3))] for k in tr_explorer.KINDS}
    built = [
        att_explorer.query_explorer(rng.normal(size=(4, 2))),
        att_explorer.temperature_explorer(rng.normal(size=5)),
        pos_explorer.encoding_explorer(rng.normal(size=(16, 8)), position=4),
        s2s_explorer.decode_stepper(list("abc"), list("xy") + ["<eos>"], rng.random((3, 3))),
        tr_explorer.attention_explorer(att, [list("abc")], [list("xyz")]),
        att_explorer.layer_cost_explorer(n=16, d=32, k=3),
    ]

    def sliders(widget):
        if isinstance(widget, (w.IntSlider, w.FloatSlider, w.FloatLogSlider)):
            yield widget
        for child in getattr(widget, "children", ()):
            yield from sliders(child)

    found = [s for b in built for s in sliders(b)]
    plt.close("all")
    assert len(found) >= 10, f"expected the explorers' sliders, found {len(found)}"
    cut = [s.description for s in found if s.style.description_width != "initial"]
    assert not cut, f"these sliders' labels can be cut off: {cut}"


def test_explorers_draw_one_at_a_time_when_events_arrive_in_threads() -> None:
    """JupyterLab delivers widget events to kernel subshells (threads): two slider moves can
    redraw at once. Matplotlib's maths-text parser breaks when two figures with log axes are
    drawn together (without the lock in utils.widgets.show_in, nearly every draw here fails)."""
    import io
    import threading

    import matplotlib.pyplot as plt

    from utils import widgets as course_widgets
    from utils.attention.explorer import draw_layer_costs

    class FakeOutput:  # the Output widget's interface that show_in uses
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def clear_output(self, wait: bool = False) -> None:
            pass

    errors: list[str] = []

    def draw(n: int):
        fig, _ = draw_layer_costs(n, 512, 3)
        fig.savefig(io.BytesIO(), format="png")  # render the tick labels, as display() does
        return fig

    def slider_events(first: int) -> None:
        for n in range(first, first + 4):
            try:
                course_widgets.show_in(FakeOutput(), lambda n=n: draw(n))
            except Exception as err:  # noqa: BLE001 - every failure is the finding
                errors.append(repr(err)[:80])

    threads = [threading.Thread(target=slider_events, args=(10 * k + 3,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert plt.get_fignums() == [], "show_in must close the figures it shows"


def _import_in_a_fresh_process(tmp_path: Path, fake_tensorflow: str | None) -> str:
    """stderr of a new Python that runs ``runtime.setup("tensorflow")`` (the real TF, or a fake)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    path = [str(root)]
    if fake_tensorflow is not None:
        (tmp_path / "tensorflow").mkdir()
        (tmp_path / "tensorflow" / "__init__.py").write_text(fake_tensorflow)
        (tmp_path / "keras").mkdir()
        (tmp_path / "keras" / "__init__.py").write_text("class utils:\n    set_random_seed = staticmethod(lambda s: None)\n")
        path.insert(0, str(tmp_path))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_ENABLE_ONEDNN_OPTS", "TF_CPP_MIN_LOG_LEVEL")}
    env["PYTHONPATH"] = os.pathsep.join(path)
    code = ("import os\nfrom utils import runtime\nruntime.setup('tensorflow', verbose=False, onednn=True)\n"
            "assert 'TF_ENABLE_ONEDNN_OPTS' not in os.environ, 'the choice leaked to later processes'\nprint('imported')")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr
    return done.stderr


def test_tensorflow_imports_without_its_banner_but_a_real_error_still_shows(tmp_path: Path) -> None:
    fake = ("import os\n"
            "os.write(2, b'I0000 port.cc:153] oneDNN custom operations are on. You may see slightly different...\\n')\n"
            "os.write(2, b'E0000 something real went wrong loading a kernel\\n')\n")
    stderr = _import_in_a_fresh_process(tmp_path, fake)
    assert "oneDNN" not in stderr
    assert "something real went wrong" in stderr


def test_the_real_tensorflow_imports_quietly_with_onednn_on(tmp_path: Path) -> None:
    stderr = _import_in_a_fresh_process(tmp_path, None)  # oneDNN on: TensorFlow writes its notice at import
    assert "oneDNN" not in stderr and "absl::InitializeLog" not in stderr, stderr


def test_run_student_watching_and_handed() -> None:
    """A test of a later exercise sees what the student's code handed the earlier function (issue 39.6)."""
    import numpy as np

    def buggy_softmax(scores, mask=None):  # exercise 1 left wrong: zeroes after the softmax
        e = np.exp(scores - scores.max(-1, keepdims=True))
        w = e / e.sum(-1, keepdims=True)
        return w if mask is None else w * mask

    namespace = {"masked_softmax": buggy_softmax}

    def attention(scores, keep):  # exercise 2: its part is to hand over the right scores and keep-mask
        return namespace["masked_softmax"](scores, mask=keep)

    def wrong_attention(scores, keep):
        return namespace["masked_softmax"](scores * 2, keep)

    rng = np.random.default_rng(0)
    scores, keep = rng.normal(size=(2, 3, 4)), rng.random((2, 3, 4)) > 0.3
    weights, calls = grading.run_student_watching(attention, namespace, "masked_softmax", scores, keep)
    assert namespace["masked_softmax"] is buggy_softmax, "the watch is undone"
    assert len(calls) == 1 and grading.handed(calls, weights, scores, keep)
    assert not grading.handed(calls, weights, scores, ~keep), "another keep-mask is not the one handed"
    assert not grading.handed(calls, weights * 0.5, scores, keep), "weights it did not return"
    weights, calls = grading.run_student_watching(wrong_attention, namespace, "masked_softmax", scores, keep)
    assert not grading.handed(calls, weights, scores, keep), "scores that are not the right ones"
    assert not grading.handed([], weights, scores, keep)
    namespace["masked_softmax"] = lambda scores, mask=None: np.zeros_like(scores)  # a trivial exercise 1
    weights, calls = grading.run_student_watching(attention, namespace, "masked_softmax", scores, keep)
    assert not grading.handed(calls, weights, scores, keep), "zeros ignore the scores: no points through them"
