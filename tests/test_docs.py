"""The documentation is tested: README.md and docs/*.md.

(a) Code blocks run.  Conventions (docs/index.md "How the examples are
    tested" says the same for writers):

    * Every ```python block of a file runs, in order, in one namespace per
      file.  A block with ``>>>`` prompts is a doctest (ELLIPSIS and
      NORMALIZE_WHITESPACE on): its output is checked.  In another block, a
      line ending with a ``# prints: TEXT`` comment states one line of the
      block's output; when a block has such comments, its standard output
      must be exactly those lines, in order (``...`` matches anything).
    * ```sh blocks: each command starting with ``mta-spark`` runs in
      process (``spark_ops.cli.main``, on the module's Spark session, in the
      working directory below) and must exit 0; a command starting with
      ``./scripts/`` must name an executable script of the repository (the
      scripts run in this file or in CI: (d), (e), ``scripts/test``).  Any
      other command needs the block to be skipped.
    * ``<!-- test: skip REASON -->`` on the line before a block skips it;
      the reason is mandatory (e.g. the block needs a Couchbase server).
    * Redis: the placeholder URL ``redis://localhost:6379/0`` is replaced by
      the real test server's URL (fixture ``redis_url``).
    * All files run in one temporary working directory (Spark's JVM and
      workers resolve relative paths against the directory they started
      in), so files must not reuse each other's relative paths.
    * Spark: a file that uses pyspark, ``spark_ops.sliding_window``,
      ``spark_ops.session`` or an ``mta-spark`` command runs with one local
      session for this module; the blocks' own ``local_session(...)`` or
      ``SparkSession.builder.getOrCreate()`` return it.

(b) Every relative link of README.md and docs/*.md names an existing file
    (and, for a ``.md#anchor`` link, an existing heading).
(c) docs/cli.md's generated part equals what docs/gen_cli.py makes from
    ``spark_ops.cli.build_parser()``.
(d) ``scripts/docs api DIR`` writes a page for every public module.
(e) ``./scripts/demo --hosts 20 --rows 20000 --out DIR`` (the README's main
    command, small) exits 0 and writes DIR/windows and DIR/host.png.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import os
import pkgutil
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DOC_FILES = [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))
REDIS_PLACEHOLDER = "redis://localhost:6379/0"
SPARK_MARKERS = ("pyspark", "sliding_window", "spark_ops.session", "local_session", "mta-spark ")
SKIP_RE = re.compile(r"^<!--\s*test:\s*skip\b\s*(.*?)\s*-->$")
FENCE_RE = re.compile(r"^( *)```\s*([\w+-]*)")
PRINTS_RE = re.compile(r"#\s*prints:\s?(.*)$")
PACKAGES = ("mta", "stores", "spark_ops")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- markdown ------------------------------------------------------------------------
@dataclass
class Block:
    path: Path
    lang: str
    lineno: int  # line of the first code line (1-based)
    code: str
    skip: str | None  # the reason, "" when the marker has none, None when not skipped

    @property
    def where(self) -> str:
        return f"{rel(self.path)}:{self.lineno}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown file, those indented in a list
    item too (their code dedented by the fence's indent)."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2).lower(), i + 1
        j = start
        while j < len(lines) and not lines[j].lstrip(" ").startswith("```"):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        skip = None
        if k >= 0:
            s = SKIP_RE.match(lines[k].strip())
            if s:
                skip = s.group(1)
        pad = " " * indent
        code = "\n".join(line[indent:] if line.startswith(pad) else line.lstrip(" ") for line in lines[start:j])
        out.append(Block(path, lang, start + 1, code + "\n", skip))
        i = j + 1
    return out


def prose(path: Path) -> str:
    """The file without its fenced code blocks (for links and headings)."""
    text, keep, inside = path.read_text().splitlines(), [], False
    for line in text:
        if FENCE_RE.match(line):
            inside = not inside
            continue
        if not inside:
            keep.append(line)
    return "\n".join(keep)


# -- (a) examples run ------------------------------------------------------------------
@pytest.fixture(scope="module")
def docs_cwd(tmp_path_factory):
    """The working directory of every file's blocks.  One for all files:
    Spark's JVM and its Python workers resolve relative paths against the
    directory it started in, so Python and Spark must share it."""
    return tmp_path_factory.mktemp("docs-cwd")


def _stop_jvm() -> None:
    """End this process's Spark JVM, so that the next session launches one in
    the current directory: the examples use relative paths, which the JVM
    resolves against the directory it started in."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        proc.stdin.close()  # the JVM exits when its stdin closes
        proc.wait(timeout=60)
    SparkContext._gateway = None
    SparkContext._jvm = None


@pytest.fixture(scope="module")
def spark_session_for_docs(docs_cwd):
    """Created only when a file needs it (in ``docs_cwd``); stopped at the end
    of the module."""
    sessions = []

    def get():
        if not sessions:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession

            from spark_ops.session import local_session

            if SparkContext._active_spark_context is not None:
                SparkSession.builder.getOrCreate().stop()
            _stop_jvm()  # a JVM started by an earlier module keeps its own cwd
            previous = os.getcwd()
            os.chdir(docs_cwd)
            try:
                sessions.append(local_session("local[2]", app="test_docs", shuffle_partitions=2,
                                              **{"spark.sql.session.timeZone": "UTC",
                                                 "spark.ui.showConsoleProgress": "false"}))
            finally:
                os.chdir(previous)
        return sessions[0]

    yield get
    for s in sessions:
        s.stop()


def _run_doctest(block: Block, code: str, ns: dict) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(code, ns, block.where, str(block.path), block.lineno - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = io.StringIO()
    runner.run(test, out=out.write, clear_globs=False)
    ns.update(test.globs)  # DocTest works on a copy: later blocks see what this one defined
    if runner.failures:
        pytest.fail(f"doctest in {block.where} failed:\n{out.getvalue()}", pytrace=False)


def _run_script(block: Block, code: str, ns: dict) -> None:
    expected = [m.group(1).rstrip() for line in code.splitlines() if (m := PRINTS_RE.search(line))]
    compiled = compile("\n" * (block.lineno - 1) + code, str(block.path), "exec")
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        exec(compiled, ns)  # noqa: S102 - the documentation's own examples
    if expected:
        got = "\n".join(line.rstrip() for line in captured.getvalue().splitlines()) + "\n"
        want = "\n".join(expected) + "\n"
        checker = doctest.OutputChecker()
        if not checker.check_output(want, got, doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE):
            pytest.fail(f"output of the block at {block.where} differs from its '# prints:' "
                        f"comments:\nexpected:\n{want}got:\n{got}", pytrace=False)
    else:
        sys.stdout.write(captured.getvalue())


def _commands(code: str) -> list[str]:
    """Shell commands of a block: comments dropped, backslash continuations joined."""
    out, current = [], ""
    for line in code.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        out.append(current.strip())
        current = ""
    if current.strip():
        out.append(current.strip())
    return out


def _run_shell(block: Block, code: str, spark) -> None:
    from spark_ops import cli

    for command in _commands(code):
        argv = shlex.split(command, comments=True)
        if argv[0] == "mta-spark":
            status = cli.main(argv[1:], spark=spark())
            assert status == 0, f"{block.where}: '{command}' exited with status {status}"
        elif argv[0].startswith("./scripts/"):
            script = ROOT / argv[0]
            assert script.is_file() and os.access(script, os.X_OK), f"{block.where}: no script {argv[0]}"
        else:
            pytest.fail(f"{block.where}: the command '{command}' is not exercised by the tests: "
                        "mark the block '<!-- test: skip REASON -->'", pytrace=False)


RUNNABLE = ("python", "sh", "bash", "console", "shell")


@pytest.mark.parametrize("path", DOC_FILES, ids=rel)
def test_examples_run(path, request, docs_cwd, monkeypatch, spark_session_for_docs):
    todo = [b for b in blocks(path) if b.lang in RUNNABLE]
    for b in todo:
        assert b.skip != "", f"{b.where}: '<!-- test: skip -->' needs a reason"
    todo = [b for b in todo if b.skip is None]
    if not todo:
        pytest.skip("no runnable blocks")
    text = "".join(b.code for b in todo)
    if REDIS_PLACEHOLDER in text:
        redis_url = request.getfixturevalue("redis_url")
    spark = spark_session_for_docs
    if any(m in text for m in SPARK_MARKERS):
        spark()  # start it now, so the blocks' own getOrCreate() returns it
    monkeypatch.chdir(docs_cwd)
    ns = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    for b in todo:
        code = b.code
        if REDIS_PLACEHOLDER in code:
            code = code.replace(REDIS_PLACEHOLDER, redis_url)
        if b.lang == "python":
            if re.search(r"^\s*>>> ", code, re.M):
                _run_doctest(b, code, ns)
            else:
                _run_script(b, code, ns)
        else:
            _run_shell(b, code, spark)


def test_skip_markers_name_a_reason():
    for path in DOC_FILES:
        for b in blocks(path):
            assert b.skip != "", f"{b.where}: '<!-- test: skip -->' needs a reason"


# -- (b) links -------------------------------------------------------------------------
LINK_RE = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<a\s+href=\"([^\"]+)\"|^\[[^\]]+\]:\s*(\S+)", re.M)
IMAGE_RE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = github_slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", prose(path))  # inline code is not a link
    found = [next(g for g in m.groups() if g) for m in LINK_RE.finditer(text)]
    return found + IMAGE_RE.findall(text)


@pytest.mark.parametrize("path", DOC_FILES, ids=rel)
def test_relative_links_exist(path):
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / file_part).resolve()
        if not dest.exists():
            broken.append(f"{target} (no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {rel(dest)})")
    assert not broken, f"{rel(path)}: broken links: {broken}"


def test_index_links_every_page():
    index = DOCS / "index.md"
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in links(index) if not t.startswith("#")}
    pages = {p.resolve() for p in DOCS.glob("*.md") if p.name != "index.md"}
    assert not pages - linked, f"docs/index.md does not link {sorted(rel(p) for p in pages - linked)}"


# -- (c) the CLI reference -------------------------------------------------------------
def _gen_cli():
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_matches_the_parser():
    gen = _gen_cli()
    current = (DOCS / "cli.md").read_text()
    assert gen.render(current) == current, (
        "docs/cli.md is out of date with spark_ops.cli.build_parser(): run ./scripts/docs cli")


def test_cli_reference_covers_every_option():
    """Independent of the generator: every subcommand and option string of the
    parser appears in docs/cli.md."""
    import argparse

    from spark_ops.cli import build_parser

    text = (DOCS / "cli.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        assert f"## mta-spark {name}" in text, name
        for action in p._actions:
            for flag in action.option_strings:
                assert f"`{flag}" in text, f"mta-spark {name} {flag} is not in docs/cli.md"


# -- (d) the API reference -------------------------------------------------------------
def public_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        mod = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(mod.__path__, package + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


@pytest.mark.timeout(600)
def test_scripts_docs_writes_a_page_per_public_module(tmp_path):
    out = tmp_path / "api"
    proc = subprocess.run([str(ROOT / "scripts" / "docs"), "api", str(out)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    missing = [m for m in public_modules() if not (out / (m.replace(".", "/") + ".html")).is_file()]
    assert not missing, f"no API page for {missing}"
    assert (out / "index.html").is_file()
    page = (out / "mta" / "window.html").read_text()
    assert "checking mode" in page and 'href="#Window"' in page  # docstrings rendered, not just listed


def test_api_reference_is_not_committed():
    ignored = subprocess.run(["git", "check-ignore", "-q", "docs/api/index.html"], cwd=ROOT)
    assert ignored.returncode == 0, "docs/api/ must be in .gitignore (it is generated)"


# -- (e) the README's main command ----------------------------------------------------
@pytest.mark.timeout(600)
def test_readme_demo_command_small(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/demo" in readme
    out = tmp_path / "demo"
    proc = subprocess.run([str(ROOT / "scripts" / "demo"), "--hosts", "20", "--rows", "20000",
                           "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / "windows").is_dir() and any((out / "windows").glob("*.parquet"))
    assert (out / "host.png").is_file() and (out / "host.png").stat().st_size > 0
    assert "windows match pandas" in proc.stdout


# -- docs/architecture.md's dependency rules ----------------------------------------------
def _imports(package: str) -> set[str]:
    import ast

    found = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_package_dependencies_are_one_way():
    assert not _imports("mta") & {"stores", "spark_ops", "pyspark", "msgpack", "redis", "couchbase"}
    assert not _imports("stores") & {"spark_ops", "pyspark"}


def test_api_page_lists_every_public_module():
    text = (DOCS / "api.md").read_text()
    missing = [m for m in public_modules() if f"| `{m}` |" not in text]
    assert not missing, f"docs/api.md does not list {missing}"
