// all_to_all: rank r sends its i-th block to rank i and receives rank i's
// r-th block, for every i.
//
// One step, pairwise shifted: rank r sends to r+1, r+2, … and receives from
// r-1, r-2, …, so no rank is everyone's first destination. Sizes need not
// be known in advance — each message says how big it is — so uneven splits
// cost no extra round. Each rank receives a block from every rank, hence
// learns every rank's dtype and row shape, and checks them identically.
// all_to_all_single's blocks also carry their sender's input_splits and
// output_splits (AllToAllSingleHeader), so every rank checks every rank's
// output_splits against what is sent to it, and a wrong one fails the op
// everywhere (not only on the rank that expected otherwise).
//
// Among config gather_world ranks or more (64), n - 1 messages per rank (n²
// in the job) are the cost of a small all-to-all: there every rank's header
// first reaches every rank in ceil(log2 n) rounds (gather_all.h), saying
// whether its input is small (at most direct_bytes). If every rank's is,
// the blocks travel Bruck's log2(n) rounds (bruck_exchange.h); if not,
// the one-round direct exchange follows. Either way each rank ends with
// what the direct exchange alone would have brought it, and checks it as
// above.
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/bruck_exchange.h"
#include "collectives/algorithms/gather_all.h"
#include "collectives/op/checks.h"
#include "proto/collectives.pb.h"
#include "rpc/value/dtype.h"
#include "rpc/value/tensor_builder.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/value/tensor_math.h"

namespace ferry {
namespace algorithms {

namespace {

// This rank's input_splits: given (checked) or even.
absl::Status SplitRows(const Op& op, AllToAllSingleArgs& a) {
  if (a.input.rank() == 0)
    return op.BadInput("input is 0-d: it is split along dimension 0");
  const int n = op.size();
  const int64_t rows = a.input.dim(0);
  if (a.input_splits.empty()) {
    if (rows % n != 0) {
      return op.BadInput(absl::StrCat("input has ", rows,
                                      " rows, not divisible by the group size ",
                                      n, "; pass input_splits"));
    }
    a.input_splits.assign(n, rows / n);
    return absl::OkStatus();
  }
  absl::Status checked = CheckSplits(op, a.input_splits, "input_splits");
  if (!checked.ok()) return checked;
  int64_t sum = 0;
  for (int64_t s : a.input_splits) {
    if (s > rows - sum) {  // Also keeps the sum from overflowing.
      return op.BadInput(absl::StrCat(
          "input_splits add up to more than the input's ", rows, " rows"));
    }
    sum += s;
  }
  if (sum != rows) {
    return op.BadInput(absl::StrCat("input_splits add up to ", sum,
                                    " but input has ", rows, " rows"));
  }
  return absl::OkStatus();
}

// The caller's output, if any, against output_splits (when given).
absl::Status CheckOutputRows(const Op& op, const AllToAllSingleArgs& a) {
  if (a.into == nullptr || a.output_splits.empty()) return absl::OkStatus();
  Shape shape = a.input.shape();
  shape[0] = 0;
  for (int64_t rows : a.output_splits) {
    if (rows > op.limits().max_tensor_dim - shape[0]) {
      return op.BadInput("output_splits add up to more than --max_tensor_dim");
    }
    shape[0] += rows;
  }
  return CheckInto(op, a.into, a.input.dtype(), shape, "output");
}

// "int64 [3]": a block's dtype and the shape of its rows.
std::string RowMeta(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), " ",
                      ShapeString(absl::MakeConstSpan(t.shape()).subspan(1)));
}

// The block from `from`, checked against its header; this rank's rows of
// it and the splits it announced.
absl::Status ReadBlock(const Op& op, int from, const Message& m,
                       proto::AllToAllSingleHeader* h) {
  if (!ReadHeader(m, h) || m.tensors.size() != 1 || m.tensors[0].rank() == 0) {
    return op.Malformed(from, "expected a tensor of rank >= 1");
  }
  const int n = op.size();
  if (h->input_splits_size() != n ||
      (h->has_output_splits() && h->output_splits_size() != n) ||
      (!h->has_output_splits() && h->output_splits_size() != 0)) {
    return op.Malformed(from, "bad splits");
  }
  if (h->input_splits(op.rank()) != m.tensors[0].dim(0))
    return op.Malformed(from, "rows differ from its input_splits");
  return absl::OkStatus();
}

// Every rank's output_splits against what every rank sends it: the same
// data on every rank, so the same error on every rank.
absl::Status CheckOutputSplits(
    const Op& op, const std::vector<proto::AllToAllSingleHeader>& h) {
  const int n = op.size();
  for (int to = 0; to < n; ++to) {
    if (!h[to].has_output_splits()) continue;
    for (int from = 0; from < n; ++from) {
      const int64_t sent = h[from].input_splits(to);
      const int64_t expected = h[to].output_splits(from);
      if (sent != expected) {
        return op.Error(
            absl::StatusCode::kInvalidArgument,
            absl::StrCat(op.Who(from), " sent ", sent, " rows to ", op.Who(to),
                         " but its output_splits[", from, "] is ", expected));
      }
    }
  }
  return absl::OkStatus();
}

// Elements in one row of `t` (rank >= 1).
int64_t RowNumel(const Tensor& t) {
  int64_t n = 1;
  for (size_t i = 1; i < t.shape().size(); ++i) {
    if (t.dim(i) == 0) return 0;
    n *= t.dim(i);  // Within the tensor's extent: no overflow.
  }
  return n;
}

// The output, allocated before the blocks arrive (or the caller's, `into`)
// so that they are received in place: rows from rank r at [offsets[r],
// offsets[r+1]). Sized by output_splits, or, without them, by guessing
// that each rank sends this one as many rows as it sends that rank (true
// of the even split of equal inputs); a wrong guess only costs the copy
// it meant to save.
struct Assembly {
  std::shared_ptr<TensorBuilder> out;
  std::vector<int64_t> offsets;
  Op::Landings land;
};

std::optional<Assembly> Assemble(const Op& op, const AllToAllSingleArgs& a) {
  if (op.size() == 1 && a.into == nullptr) return std::nullopt;
  const std::vector<int64_t>& rows =
      a.output_splits.empty() ? a.input_splits : a.output_splits;
  Assembly as;
  as.offsets = {0};
  for (int64_t r : rows) {
    // output_splits are checked to be non-negative, not bounded: the
    // output must fit what may be allocated, or the copies stay.
    if (r > op.limits().max_tensor_dim - as.offsets.back()) return std::nullopt;
    as.offsets.push_back(as.offsets.back() + r);
  }
  Shape shape = a.input.shape();
  shape[0] = as.offsets.back();
  if (a.into != nullptr) {
    if (a.into->dtype() != a.input.dtype() || a.into->shape() != shape) {
      return std::nullopt;  // A wrong guess: Place copies, or refuses.
    }
    as.out = a.into;
  } else {
    absl::StatusOr<int64_t> numel =
        CheckedNumElements(shape, a.input.itemsize());
    if (!numel.ok() || *numel > op.limits().max_alloc_bytes /
                                    static_cast<int64_t>(a.input.itemsize())) {
      return std::nullopt;
    }
    absl::StatusOr<TensorBuilder> out =
        TensorBuilder::Create(a.input.dtype(), std::move(shape));
    if (!out.ok()) return std::nullopt;
    as.out = std::make_shared<TensorBuilder>(*std::move(out));
  }
  const int64_t row = RowNumel(a.input);
  as.land.resize(op.size());
  for (int r = 0; r < op.size(); ++r) {
    if (r == op.rank()) continue;
    as.land[r] = TensorLanding::Within(*as.out, as.offsets[r] * row,
                                       as.offsets[r + 1] * row);
  }
  return as;
}

// The output if every other rank's block was received in place (this
// rank's own is copied in now).
std::optional<Tensor> Assembled(const Op& op, std::optional<Assembly>& as,
                                const std::vector<Tensor>& rows) {
  if (!as.has_value()) return std::nullopt;
  for (int r = 0; r < op.size(); ++r) {
    if (rows[r].dim(0) != as->offsets[r + 1] - as->offsets[r]) {
      return std::nullopt;
    }
    if (r != op.rank() && !as->land[r]->Holds(rows[r])) return std::nullopt;
  }
  const Tensor& mine = rows[op.rank()];
  char* at = as->out->data() +
             as->offsets[op.rank()] * RowNumel(mine) * mine.itemsize();
  if (mine.nbytes() > 0 && at != mine.data()) {
    std::memcpy(at, mine.data(), mine.nbytes());
  }
  return HeldBy(as->out);
}

void Received(Result<Tensor> result, std::optional<Assembly> as, TensorOut into,
              std::vector<Message> got) {
  Op& op = result.op();
  const int n = op.size();
  std::vector<proto::AllToAllSingleHeader> headers(n);
  std::vector<std::string> metas;
  std::vector<Tensor> rows;
  for (int r = 0; r < n; ++r) {
    absl::Status ok = ReadBlock(op, r, got[r], &headers[r]);
    if (!ok.ok()) return op.Fail(ok);
    rows.push_back(std::move(got[r].tensors[0]));
    metas.push_back(RowMeta(rows.back()));
  }
  absl::Status same = CheckSame(op, metas, "rows of");
  if (same.ok()) same = CheckOutputSplits(op, headers);
  if (!same.ok()) return op.Fail(same);
  if (std::optional<Tensor> out = Assembled(op, as, rows)) {
    return std::move(result).Set(*std::move(out));
  }
  absl::StatusOr<Tensor> out = Concat(rows, 0);
  if (out.ok()) out = Place(op, into, *out, "output");
  if (!out.ok()) return op.Fail(out.status());
  std::move(result).Set(*std::move(out));
}

// Each rank's tensor for this one, in `into` where given.
absl::StatusOr<std::vector<Tensor>> PlaceAll(const Op& op,
                                             const std::vector<TensorOut>& into,
                                             std::vector<Tensor> got) {
  if (into.empty()) return got;
  for (int r = 0; r < op.size(); ++r) {
    absl::StatusOr<Tensor> placed =
        Place(op, into[r], got[r], absl::StrCat("output[", r, "]"));
    if (!placed.ok()) return placed.status();
    got[r] = *std::move(placed);
  }
  return got;
}

// Where each other rank's tensor is received (none without `into`).
Op::Landings LandingsOf(const Op& op, const std::vector<TensorOut>& into) {
  Op::Landings land;
  if (into.empty()) return land;
  land.resize(op.size());
  for (int r = 0; r < op.size(); ++r) {
    if (r != op.rank()) land[r] = LandingOf(into[r]);
  }
  return land;
}

// What each rank sent this one, from every rank's pack and the blocks
// Bruck's rounds brought: the messages a direct exchange would have.
void Unpacked(const std::vector<proto::AllToAllPack>& packs,
              std::vector<Tensor> blocks, Op::OnMessages then) {
  std::vector<Message> got(blocks.size());
  for (size_t r = 0; r < blocks.size(); ++r) {
    got[r] = Message{packs[r].head(), {std::move(blocks[r])}, Value()};
  }
  std::move(then)(std::move(got));
}

// Sends blocks[i] (with `head`) to each rank i; `then` gets what each rank
// sent this one, by group rank (its own entry: blocks[rank]), received
// into `land` where the direct exchange carries them. Among gather_world
// ranks or more, after the gathered headers (the file's comment).
void Exchange(Op& op, std::string head, std::vector<Tensor> blocks,
              Op::OnMessages then, Op::Landings land) {
  const int n = op.size();
  auto direct = [head, blocks](Op& op, Op::OnMessages then, Op::Landings land) {
    op.ExchangeEach(
        0,
        [&](int to) {
          return Message{head, {blocks[to]}, Value()};
        },
        std::move(then), std::move(land));
  };
  if (n < op.config().gather_world) {
    return direct(op, std::move(then), std::move(land));
  }
  int64_t bytes = 0;
  for (const Tensor& b : blocks) bytes += static_cast<int64_t>(b.nbytes());
  proto::AllToAllPack pack;
  pack.set_blocks(bytes <= op.config().direct_bytes);
  pack.set_head(std::move(head));
  GatherAll(op, Message::Of(pack),
            [op = op.shared_from_this(), blocks = std::move(blocks),
             direct = std::move(direct), then = std::move(then),
             land = std::move(land)](std::vector<Message> all) mutable {
              std::vector<proto::AllToAllPack> packs(all.size());
              bool small = true;
              for (size_t r = 0; r < all.size(); ++r) {
                if (!ReadHeader(all[r], &packs[r]) || !all[r].tensors.empty()) {
                  return op->Fail(op->Malformed(static_cast<int>(r),
                                                "not an all_to_all header"));
                }
                small = small && packs[r].blocks();
              }
              if (!small) return direct(*op, std::move(then), std::move(land));
              BruckExchange(*op, std::move(blocks),
                            [packs = std::move(packs), then = std::move(then)](
                                std::vector<Tensor> got) mutable {
                              Unpacked(packs, std::move(got), std::move(then));
                            });
            });
}

}  // namespace

void AllToAll(Result<std::vector<Tensor>> result, AllToAllArgs args) {
  Op& op = result.op();
  absl::Status ok = CheckTensorList(op, args.inputs, "input");
  if (ok.ok() && !args.into.empty() &&
      static_cast<int>(args.into.size()) != op.size()) {
    ok = op.BadInput(absl::StrCat("output must be a list of ", op.size(),
                                  " tensors, got ", args.into.size()));
  }
  if (!ok.ok()) return op.Fail(ok);
  Op::Landings land = LandingsOf(op, args.into);
  Exchange(
      op, "", std::move(args.inputs),
      [result = std::move(result),
       into = std::move(args.into)](std::vector<Message> got) mutable {
        Op& op = result.op();
        std::vector<std::string> dtypes;
        std::vector<Tensor> out;
        for (int r = 0; r < op.size(); ++r) {
          if (got[r].tensors.size() != 1)
            return op.Fail(op.Malformed(r, "expected a tensor"));
          out.push_back(std::move(got[r].tensors[0]));
          dtypes.emplace_back(DTypeName(out.back().dtype()));
        }
        absl::Status same = CheckSame(op, dtypes, "dtype");
        if (!same.ok()) return op.Fail(same);
        absl::StatusOr<std::vector<Tensor>> placed =
            PlaceAll(op, into, std::move(out));
        if (!placed.ok()) return op.Fail(placed.status());
        std::move(result).Set(*std::move(placed));
      },
      std::move(land));
}

void AllToAll(Result<std::vector<Tensor>> result, std::vector<Tensor> inputs) {
  AllToAll(std::move(result), AllToAllArgs{std::move(inputs), {}});
}

void AllToAllSingle(Result<Tensor> result, AllToAllSingleArgs a) {
  Op& op = result.op();
  absl::Status ok = SplitRows(op, a);
  if (ok.ok()) ok = CheckSplits(op, a.output_splits, "output_splits");
  if (ok.ok()) ok = CheckOutputRows(op, a);
  if (!ok.ok()) return op.Fail(ok);
  proto::AllToAllSingleHeader header;
  for (int64_t s : a.input_splits) header.add_input_splits(s);
  header.set_has_output_splits(!a.output_splits.empty());
  for (int64_t s : a.output_splits) header.add_output_splits(s);
  std::vector<Tensor> blocks;
  int64_t at = 0;
  for (int64_t rows : a.input_splits) {
    blocks.push_back(*a.input.Rows(at, at + rows));  // A checked split.
    at += rows;
  }
  std::optional<Assembly> as = Assemble(op, a);
  Op::Landings land;
  if (as.has_value()) land = as->land;
  Exchange(
      op, header.SerializeAsString(), std::move(blocks),
      [result = std::move(result), as = std::move(as),
       into = std::move(a.into)](std::vector<Message> got) mutable {
        Received(std::move(result), std::move(as), std::move(into),
                 std::move(got));
      },
      std::move(land));
}

}  // namespace algorithms
}  // namespace ferry
