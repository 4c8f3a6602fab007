"""Single-use codes minted in the send log (the owner's "Mint a code per recipient").

minting.py (the prefix rule, the alphabet, `mint`: a claimed batch's codes in one INSERT, in
the claim's transaction), fields.py (`{{ code }}`: known when codes are on, an error when
not, the sample a test send shows), redemption.py (the one writer of `redeemed_at`: its
transition table), lookup.py (a code's story, a person's codes).
"""
