#!/usr/bin/env python3
"""Writes an F32 copy of a GGUF file: every quantized tensor dequantized with the `gguf`
package (the dequantizers loupe's GGUF loader matches bit for bit), every other tensor and
every metadata key copied, general.file_type set to ALL_F32. So llama.cpp can run the same
weights in F32 that loupe runs after dequantizing at load (bench/generate's F32 rows).

usage: python3 tools/gguf_to_f32.py IN.gguf OUT.gguf"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, GGMLQuantizationType
from gguf.quants import dequantize


def main():
    src, dst = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    arch = r.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    w = GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            w.add_uint32(name, 0)  # LLAMA_FTYPE_ALL_F32
            continue
        t = f.types[0]
        if t == GGUFValueType.ARRAY:
            et = f.types[-1]
            if et == GGUFValueType.STRING:
                vals = [bytes(f.parts[i]).decode("utf-8", errors="surrogateescape") for i in f.data]
            else:
                vals = [f.parts[i].tolist()[0] for i in f.data]
            w.add_key_value(name, vals, t, sub_type=et)
        elif t == GGUFValueType.STRING:
            w.add_key_value(name, bytes(f.parts[f.data[0]]).decode("utf-8", errors="surrogateescape"), t)
        else:
            w.add_key_value(name, f.parts[f.data[0]].tolist()[0], t)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order (outermost first)
        if t.tensor_type in (GGMLQuantizationType.F32,):
            data = np.asarray(t.data, dtype=np.float32).reshape(shape)
        else:
            data = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        w.add_tensor(t.name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
