import os, sys, time, statistics as st, shutil
os.environ["HF_HUB_OFFLINE"]="1"
from pathlib import Path
import qdrant_edge as qe
import brain.vector_store.edge as edge
from config import load_settings
from brain.app import Brain
from brain.embedder import REGISTRY, HashEmbedder
from brain.bulk import BulkNote, bulk_add
from brain.bench.speed import synthetic_notes, synthetic_queries, PROJECTS
from brain.memory import RecallFilter
N=100000
variant=sys.argv[1]
home=Path(f"/tmp/profdir/hv-{variant}")
if variant != "base":
    orig_open = edge.EdgeStore.open
    def open_(self, dimension):
        hn = qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=int(sys.argv[2]), payload_m=16 if "pm" in variant else None)
        cfg = qe.EdgeConfig(vectors={edge.DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
                            sparse_vectors={edge.SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}, hnsw_config=hn)
        fresh = not (self.path.exists() and any(self.path.iterdir()))
        if fresh:
            self.path.mkdir(parents=True, exist_ok=True); self._shard = qe.EdgeShard.create(str(self.path), cfg)
            if "tenant" in variant:
                self._shard.update(qe.UpdateOperation.create_field_index("project", qe.KeywordIndexParams(is_tenant=True)))
        else:
            self._shard = qe.EdgeShard.load(str(self.path))
        self.ensure_indexes()
    edge.EdgeStore.open = open_
fresh = not home.exists()
s=load_settings(home=home); s.embedding.model="offline/hash-384"
b=Brain(s, embedder=HashEmbedder(REGISTRY["offline/hash-384"])).open()
if fresh:
    t=time.time()
    bulk_add(b.memory, (BulkNote(x, project=f"proj-{i % PROJECTS}") for i,x in enumerate(synthetic_notes(N))), batch=1024)
    print("bulk", round(time.time()-t), flush=True)
    t=time.time(); b.store._shard.optimize(); print("optimize", round(time.time()-t), flush=True)
qs=synthetic_queries(200); m=b.memory
vecs=[m.embedder.embed_query(q).tolist() for q in qs]
fl=[m.build_filter(RecallFilter(project=f"proj-{i%PROJECTS}")) for i in range(200)]
def tm(f):
    lat=[]
    for i in range(200):
        t=time.perf_counter(); f(i); lat.append((time.perf_counter()-t)*1000)
    return round(st.median(lat),2)
for r in range(2):
    print(variant, "dense 1proj", tm(lambda i: b.store.query_dense(vecs[i], fl[i], 50)), "exact", tm(lambda i: b.store.query_dense(vecs[i], fl[i], 50, exact=True)), flush=True)
# recall vs exact
rec=[]
for i in range(100):
    a={h.id for h in b.store.query_dense(vecs[i], fl[i], 10)}; e={h.id for h in b.store.query_dense(vecs[i], fl[i], 10, exact=True)}
    rec.append(len(a&e)/10)
print(variant, "recall@10 vs exact", sum(rec)/len(rec))
b.close()
