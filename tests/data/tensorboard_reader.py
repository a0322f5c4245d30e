"""Reads the golden event file of tests/data/test_tensorboard.cpp with TensorBoard itself.

The golden hex (kGoldenHex) is taken from the test's source, written to a folder and
loaded by tensorboard's EventAccumulator; its scalars and image must be the ones the
test wrote, and the bytes must equal TensorBoard's own protobuf serialization framed by
its RecordWriter. Exits 77 (skipped) when tensorboard is not importable.
"""
import io
import os
import re
import sys
import tempfile

try:
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter
except ImportError as e:
    print(f"SKIP: {sys.executable} cannot import tensorboard ({e}); configure with "
          "-DZT_TENSORBOARD_PYTHON=<a python with tensorboard installed> to run this check")
    sys.exit(77)

source = open(sys.argv[1], encoding="utf-8").read()
block = re.search(r"kGoldenHex\s*=\s*((?:\s*\"[0-9a-f]*\")+);", source)
assert block, "kGoldenHex not found in " + sys.argv[1]
golden = bytes.fromhex("".join(re.findall(r"\"([0-9a-f]*)\"", block.group(1))))

# The same events through TensorBoard's protobuf classes and record writer.
buf = io.BytesIO()
w = RecordWriter(buf)
t = 1700000000.5
Value = summary_pb2.Summary.Value
w.write(event_pb2.Event(wall_time=t, file_version="brain.Event:2").SerializeToString())
w.write(event_pb2.Event(wall_time=t, step=1, summary=summary_pb2.Summary(
    value=[Value(tag="loss", simple_value=0.5)])).SerializeToString())
w.write(event_pb2.Event(wall_time=t, step=300, summary=summary_pb2.Summary(
    value=[Value(tag="train/lr", simple_value=0.001)])).SerializeToString())
image = summary_pb2.Summary.Image(height=2, width=3, colorspace=3,
                                  encoded_image_string=b"\x89PNG\x00\xff")
w.write(event_pb2.Event(wall_time=t, step=2, summary=summary_pb2.Summary(
    value=[Value(tag="recon", image=image)])).SerializeToString())
assert buf.getvalue() == golden, "golden bytes differ from TensorBoard's serialization"

with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "events.out.tfevents.1700000000.golden.zt"), "wb") as f:
        f.write(golden)
    acc = event_accumulator.EventAccumulator(d)
    acc.Reload()
    loss = [(s.step, s.value, s.wall_time) for s in acc.Scalars("loss")]
    lr = [(s.step, s.value) for s in acc.Scalars("train/lr")]
    images = [(i.step, i.height, i.width, i.encoded_image_string) for i in acc.Images("recon")]
    print("loss", loss)
    print("train/lr", lr)
    print("recon", images)
    assert loss == [(1, 0.5, t)], loss
    assert len(lr) == 1 and lr[0][0] == 300 and abs(lr[0][1] - 0.001) < 1e-9, lr
    assert images == [(2, 2, 3, b"\x89PNG\x00\xff")], images
print("OK: TensorBoard reads the golden event file")
