# Golden: a tiny decoder (Llama family) or its PEFT LoRA; --arch picks which.
# Usage: python3 tools/golden/gen_decoder.py --arch llama_cls --out tests/golden/llama_cls
import argparse

import decoder_golden
import decoder_models as dm

LORA = ("lora_llama_cls", "lora_qwen2_lm")

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="decoder golden")
    ap.add_argument("--arch", required=True, choices=sorted(dm.ARCHS) + list(LORA))
    ap.add_argument("--out", required=True, help="golden directory to (re)create")
    args = ap.parse_args()
    if args.arch in LORA:
        import decoder_lora_golden
        decoder_lora_golden.run(args.arch, args.out)
    else:
        decoder_golden.run(args.arch, args.out)
