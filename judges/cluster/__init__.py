"""The judge on a Ray cluster: the HTTP front on one host, compile and cases as Ray tasks.

- `bundles` — a problem package as one value (cases, answers, limits, checker sources) that
  travels through Ray's object store and is written out once per node;
- `node` — what runs on a worker node: the sandbox (the same `judges.sandbox.runner` as locally, set
  up and checked once per worker process), the node's checker cache, compile and case tasks;
- `front` — the front's side: connecting, choosing and checking nodes, submitting tasks,
  turning a lost worker or node into a retry and, past the retries, a judge fault;
- `connect` — joining a cluster or starting the judge's own local one (loopback only);
- `gpu`, `gpu_front` — GPU problems: the GPU node's trial task, and the front's GPU nodes;
- `probes` — reading a node's probe answer, the same for CPU and GPU nodes.

Only `front` and the modules only it imports (`connect`, `gpu_front`, `probes`) import Ray at
module level, and only `judges.service.setup` imports `front`, when the service is started with
`--ray`.
"""
