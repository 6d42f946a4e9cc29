"""The transaction coordinator's pure core: one transactional id's state, ops and records.

Like the group machines, nothing here imports trio or does I/O (tests/unit/test_layering.py):
the actor (actors/txn_actor.py) steps ops through `machine.handle`, stores the records it
returns in the transaction log, writes the markers a Prepare* state calls for, and answers.
"""
