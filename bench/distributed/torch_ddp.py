"""PyTorch DDP (gloo) beside loupe's data-parallel run (bench/distributed/run.sh --torch): the same
BERT config (random weights, dropout off), sst2-mini rows tokenized with the model's vocab.txt and
padded per batch, the same global batch split over 1 or 2 processes of one thread each, AdamW;
full fine-tuning and LoRA (PEFT, r 8 on query/value, as loupe's default targets). Prints the
median step time after the first two steps."""
import argparse, os, statistics, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, a, method, out):
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR=a.master, MASTER_PORT=str(a.port))
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    cfg = BertConfig.from_json_file(a.config)
    model = BertForSequenceClassification(cfg)
    if method == "lora":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["query", "value"],
                                                 task_type="SEQ_CLS"))
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    tok = BertTokenizer(vocab_file=os.path.join(os.path.dirname(a.config), "vocab.txt"))
    rows = [l.rstrip("\n").split("\t") for l in open(a.train, encoding="utf-8")][1:]
    per = a.batch // world
    times = []
    for step in range(a.steps):
        batch = rows[step * a.batch:(step + 1) * a.batch][rank * per:(rank + 1) * per]
        enc = tok([r[0] for r in batch], padding=True, truncation=True, max_length=128, return_tensors="pt")
        labels = torch.tensor([int(r[1]) for r in batch])
        t0 = time.perf_counter()
        loss = model(**enc, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    if rank == 0:
        out.put(statistics.median(times[2:]) * 1e3)
    if world > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--train", default=os.path.join(os.path.dirname(__file__), "../../data/sst2-mini/train.tsv"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--master", default="127.0.0.1", help="rank 0's address (MASTER_ADDR)")
    ap.add_argument("--method", choices=("full", "lora"), help="with --world: one method, one process")
    ap.add_argument("--world", type=int, help="run one process of a job of this size (started by the caller, "
                                              "e.g. one per network namespace); prints rank 0's median step ms")
    ap.add_argument("--rank", type=int, default=0)
    a = ap.parse_args()
    if a.world:
        class Print:
            def put(self, ms):
                print(f"{ms:.3f}")
        worker(a.rank, a.world, a, a.method or "full", Print())
        return
    ctx = mp.get_context("spawn")
    for method in ("full", "lora"):
        res = {}
        for world in (1, 2):
            q = ctx.Queue()
            ps = [ctx.Process(target=worker, args=(r, world, a, method, q)) for r in range(world)]
            for p in ps:
                p.start()
            res[world] = q.get()
            for p in ps:
                p.join()
            a.port += 1
            what = f"{world}r1t DDP gloo" if world > 1 else "1r1t (no DDP)"
            print(f"torch  {method:5s} {what:16s} {res[world]:10.1f} {a.batch * 1000 / res[world]:9.1f}")
        print(f"torch  {method:5s} scaling 1 -> 2 processes: {res[1] / res[2]:.2f}x, "
              f"efficiency {100 * res[1] / (2 * res[2]):.0f} %")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
