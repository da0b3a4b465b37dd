"""pytorch/examples' batch-updating parameter server
(distributed/rpc/batch/parameter_server.py) on ferry.rpc, on CPU.

    tools/dev python -m ferry.launch -n 3 \\
        tools/python/examples/rpc_parameter_server.py

Rank 0 is the parameter server, the others trainers. Each trainer sends
its gradients with rpc_sync to the server's
BatchUpdateParameterServer.update_and_fetch_model, an async_execution
function: the server answers every trainer of a round together, once the
last one reported, with the updated model.

Changed from the original, beyond `import ferry.rpc as rpc` (README,
"torch.distributed.rpc"):
- the model is a small one (torchvision's resnet50 is not in Debian) and
  runs on the CPU (no .cuda());
- the server returns the model's parameters, not the model: ferry.rpc
  sends values (tensors), never pickled objects; each trainer keeps its
  own model and loads the parameters into it;
- the processes come from ferry.launch (RANK, WORLD_SIZE, MASTER_ADDR,
  MASTER_PORT) instead of mp.spawn with a fixed port.
"""
import os
import threading
from datetime import datetime

import torch
import torch.nn as nn
from torch import optim

import ferry.rpc as rpc

num_classes, batch_update_size = 10, 2
num_batches = 3
batch_size, image_w, image_h = 8, 16, 16


def timed_log(text):
    print(f"{datetime.now().strftime('%H:%M:%S')} {text}", flush=True)


def make_model():
    torch.manual_seed(0)  # Every copy starts equal.
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * image_w * image_h, 32),
                         nn.ReLU(), nn.Linear(32, num_classes))


def parameters_of(model):
    return [p.detach().clone() for p in model.parameters()]


def load_parameters(model, params):
    with torch.no_grad():
        for p, value in zip(model.parameters(), params):
            p.copy_(value)
    return model


class BatchUpdateParameterServer(object):

    def __init__(self, batch_update_size=batch_update_size):
        self.model = make_model()
        self.lock = threading.Lock()
        self.future_model = torch.futures.Future()
        self.batch_update_size = batch_update_size
        self.curr_update_size = 0
        self.optimizer = optim.SGD(self.model.parameters(), lr=0.001,
                                   momentum=0.9)
        for p in self.model.parameters():
            p.grad = torch.zeros_like(p)

    def get_model(self):
        return parameters_of(self.model)

    @staticmethod
    @rpc.functions.async_execution
    def update_and_fetch_model(ps_rref, grads):
        self = ps_rref.local_value()
        timed_log(f"PS got {self.curr_update_size}/{batch_update_size} "
                  "updates")
        for p, g in zip(self.model.parameters(), grads):
            p.grad += g
        with self.lock:
            self.curr_update_size += 1
            fut = self.future_model

            if self.curr_update_size >= self.batch_update_size:
                for p in self.model.parameters():
                    p.grad /= self.batch_update_size
                self.curr_update_size = 0
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=False)
                fut.set_result(parameters_of(self.model))
                timed_log("PS updated model")
                self.future_model = torch.futures.Future()

        return fut


class Trainer(object):

    def __init__(self, ps_rref):
        self.ps_rref = ps_rref
        self.loss_fn = nn.MSELoss()
        self.one_hot_indices = torch.LongTensor(batch_size) \
                                    .random_(0, num_classes) \
                                    .view(batch_size, 1)

    def get_next_batch(self):
        for _ in range(num_batches):
            inputs = torch.randn(batch_size, 3, image_w, image_h)
            labels = torch.zeros(batch_size, num_classes) \
                          .scatter_(1, self.one_hot_indices, 1)
            yield inputs, labels

    def train(self):
        name = rpc.get_worker_info().name
        m = load_parameters(make_model(), self.ps_rref.rpc_sync().get_model())
        for inputs, labels in self.get_next_batch():
            timed_log(f"{name} processing one batch")
            self.loss_fn(m(inputs), labels).backward()
            timed_log(f"{name} reporting grads")
            params = rpc.rpc_sync(
                self.ps_rref.owner(),
                BatchUpdateParameterServer.update_and_fetch_model,
                args=(self.ps_rref, [p.grad for p in m.parameters()]),
            )
            m = load_parameters(make_model(), params)
            timed_log(f"{name} got updated model")
        return sum(float(p.sum()) for p in m.parameters())


def run_trainer(ps_rref):
    trainer = Trainer(ps_rref)
    return trainer.train()


def run_ps(trainers):
    timed_log("Start training")
    ps_rref = rpc.RRef(BatchUpdateParameterServer())
    futs = []
    for trainer in trainers:
        futs.append(
            rpc.rpc_async(trainer, run_trainer, args=(ps_rref,))
        )

    torch.futures.wait_all(futs)
    timed_log("Finish training")
    # Not the original's: every trainer ended with the server's model.
    final = sum(float(p.sum()) for p in ps_rref.local_value().model.parameters())
    assert all(abs(f.wait() - final) < 1e-4 for f in futs), final
    print(f"trainers and server agree on the model ({final:.6f})")


def run(rank, world_size):
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=16,
                                              rpc_timeout=0)
    if rank != 0:
        rpc.init_rpc(f"trainer{rank}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    else:
        rpc.init_rpc("ps", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
        run_ps([f"trainer{r}" for r in range(1, world_size)])

    # block until all rpcs finish
    rpc.shutdown()


if __name__ == "__main__":
    world_size = int(os.environ["WORLD_SIZE"])
    assert world_size == batch_update_size + 1, "run with 3 workers"
    run(int(os.environ["RANK"]), world_size)
