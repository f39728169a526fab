"""A Ray Serve deployment of a Kiln artifact (docs/SERVING.md).

Each replica loads the `.kiln` size set once (no compile, no LLVM work) and
serves HTTP requests: the body is one input's raw bytes (C order), the
`X-Shape` header its shape (`1,3,224,224`) and `X-Dtype` its NumPy dtype
(default float32); the answer is the first output the same way, and
`X-Batch-Rows` the rows of the run that computed it. Requests that arrive
together are batched by `@serve.batch` along dim 0 and padded up to the
smallest batch size the artifact holds.

    serve run kiln_serve:app_builder artifact=/path/model.kiln replicas=2

or from Python: serve.run(KilnModel.options(num_replicas=2).bind(path)).
"""

import asyncio

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

import kiln

MAX_BATCH = 8
NUMPY = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i64": np.int64,
         "i32": np.int32, "i16": np.int16, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}


@serve.deployment(ray_actor_options={"num_cpus": 1})
class KilnModel:
    def __init__(self, artifact: str):
        self.exe = kiln.load(artifact)
        sizes = self.exe.specializations
        if not sizes or any(len(s) != 1 for s in sizes):
            raise kiln.Error(f"{artifact}: serving needs a size set over one batch symbol "
                             f"(kiln compile --dim batch=1,2,4,8 -o ...), it holds {sizes}")
        self.batches = sorted(next(iter(s.values())) for s in sizes)
        name, dtype, shape = self.exe.inputs[0]
        self.row = (np.dtype(NUMPY[dtype]), tuple(shape[1:]))  # what every request must be

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=0.005)
    async def infer(self, xs: list) -> list:
        # Requests in order, in runs of at most the largest batch size.
        # The runs go to a worker thread (Kiln releases the GIL), so that the
        # replica's event loop keeps taking requests meanwhile.
        out, run = [], []
        for x in xs + [None]:
            if run and (x is None or sum(len(r) for r in run) + len(x) > self.batches[-1]):
                out += await asyncio.to_thread(self._run, run)
                run = []
            if x is not None:
                run.append(x)
        return out

    def _run(self, xs):
        n = sum(len(x) for x in xs)
        b = next(b for b in self.batches if b >= n)
        pad = np.zeros((b - n,) + xs[0].shape[1:], xs[0].dtype)
        y = self.exe(np.concatenate(xs + [pad]))  # in a worker thread: see infer
        y = y[0] if isinstance(y, tuple) else y
        out, at = [], 0
        for x in xs:
            out.append((y[at:at + len(x)], n))
            at += len(x)
        return out

    async def __call__(self, request: Request) -> Response:
        try:
            shape = tuple(int(d) for d in request.headers["x-shape"].split(","))
            dtype = np.dtype(request.headers.get("x-dtype", "float32"))
            x = np.frombuffer(await request.body(), dtype).reshape(shape)
        except (KeyError, ValueError, TypeError) as e:
            return Response(f"bad request: {e}\n", status_code=400)
        if (x.dtype, x.shape[1:]) != self.row or not 1 <= len(x) <= self.batches[-1]:
            return Response(f"bad request: a {x.dtype} array of shape {x.shape}; this model "
                            f"takes {self.row[0]} of shape (n,{','.join(map(str, self.row[1]))})"
                            f" with 1 <= n <= {self.batches[-1]}\n", status_code=422)
        y, rows = await self.infer(x)
        y = np.ascontiguousarray(y)
        return Response(y.tobytes(), media_type="application/octet-stream",
                        headers={"x-shape": ",".join(map(str, y.shape)),
                                 "x-dtype": str(y.dtype), "x-batch-rows": str(rows)})


def app_builder(args: dict):
    """For `serve run kiln_serve:app_builder artifact=PATH [replicas=N]`."""
    return KilnModel.options(num_replicas=int(args.get("replicas", 2))).bind(args["artifact"])
