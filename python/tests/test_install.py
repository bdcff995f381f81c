"""python/ installs offline into a venv made with --system-site-packages (python/README.md).

A copy of python/ (pyproject.toml, README.md, autopar/) is installed with
``pip install --no-build-isolation --no-deps --no-index`` into a fresh venv; the package
must then import from another directory without PYTHONPATH, every console script of
pyproject.toml must answer --help, and autopar-draw must write the same page as
autopar.draw in this process.  About 10 s.  Skipped where the interpreter cannot make a
venv with pip (Debian: python3-venv) or has no setuptools / wheel to build with.
"""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(PYTHON_DIR, "tests", "data")


def console_scripts():
    """{name: 'module:function'} from pyproject.toml's [project.scripts]."""
    with open(os.path.join(PYTHON_DIR, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib
        return dict(tomllib.loads(text)["project"]["scripts"])
    except ImportError:  # Python < 3.11: the table is simple enough to read by hand.
        section = re.search(r"^\[project\.scripts\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
        return dict(re.findall(r'^([\w.-]+)\s*=\s*"([^"]+)"', section.group(1), re.M))


def missing_tools():
    for module in ("ensurepip", "venv", "setuptools", "wheel"):
        if importlib.util.find_spec(module) is None:
            return module
    return None


@unittest.skipIf(missing_tools(), f"cannot build a venv install: no {missing_tools()}")
class InstallIntoVenv(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="autopar-install-")
        src = os.path.join(cls.tmp, "src")
        os.makedirs(src)
        for f in ("pyproject.toml", "README.md"):
            shutil.copy(os.path.join(PYTHON_DIR, f), src)
        shutil.copytree(os.path.join(PYTHON_DIR, "autopar"), os.path.join(src, "autopar"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        cls.env = {k: v for k, v in os.environ.items()
                   if k != "PYTHONPATH" and not k.startswith("PIP_")}
        cls.env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                       PYTHONDONTWRITEBYTECODE="1")
        venv = os.path.join(cls.tmp, "venv")
        cls.bin = os.path.join(venv, "bin")
        cls.run_ok([sys.executable, "-m", "venv", "--system-site-packages", venv])
        cls.run_ok([os.path.join(cls.bin, "pip"), "install", "--no-build-isolation",
                    "--no-deps", "--no-index", "--quiet", src])
        cls.cwd = os.path.join(cls.tmp, "elsewhere")
        os.makedirs(cls.cwd)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def run_ok(cls, argv, **kw):
        r = subprocess.run(argv, env=cls.env, capture_output=True, text=True, timeout=300,
                           **kw)
        if r.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {r.returncode}:\n"
                                 f"{r.stdout}\n{r.stderr}")
        return r

    def test_imports_from_the_venv(self):
        r = self.run_ok([os.path.join(self.bin, "python"), "-c",
                         "import autopar, autopar.draw, autopar.plan, autopar.models, "
                         "autopar.schedule; print(autopar.draw.__file__)"], cwd=self.cwd)
        path = r.stdout.strip()
        self.assertTrue(path.startswith(os.path.join(self.tmp, "venv")), path)
        self.assertTrue(path.endswith(os.path.join("autopar", "draw", "__init__.py")), path)

    def test_console_scripts_answer_help(self):
        scripts = console_scripts()
        self.assertIn("autopar-draw", scripts)
        for name in scripts:
            with self.subTest(script=name):
                r = self.run_ok([os.path.join(self.bin, name), "--help"], cwd=self.cwd)
                self.assertIn("usage:", r.stdout)

    def test_autopar_draw_writes_the_same_page(self):
        from autopar import draw, plan

        report = os.path.join(DATA, "plan_gpipe_stages.json")
        out = os.path.join(self.cwd, "plan.html")
        self.run_ok([os.path.join(self.bin, "autopar-draw"), report, "-o", out],
                    cwd=self.cwd)
        with open(out, encoding="utf-8") as f:
            page = f.read()
        self.assertEqual(page, draw.render_html(plan.load(report), source=report))


if __name__ == "__main__":
    unittest.main()
