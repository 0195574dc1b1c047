# Golden: PEFT LoRA (r=4, alpha=8, use_rslora=False) on the tiny distilbert classifier.
# Usage: python3 tools/golden/gen_lora_distilbert.py --out tests/golden/lora_distilbert
import golden_common as gc
import lora_golden

if __name__ == "__main__":
    lora_golden.run("distilbert", gc.parse_out("lora_distilbert golden"), rslora=False)
