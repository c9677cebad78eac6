"""The CPU rehearsal (`guidance-ttt rehearse`): the whole frozen-mode loop against real Reef and the
real judge, with labelled stand-ins for the two models. Uses every package but `cli` and
`preflight`.
"""
