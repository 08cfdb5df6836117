"""Differential measurement of rknnrt's int8 against the vendor's rknn-toolkit2 (optional)."""
