"""`python -m sentadapt ...` (also what `accelerate launch -m sentadapt adapt ...` runs)."""

from sentadapt.cli import main

if __name__ == "__main__":
    main()
