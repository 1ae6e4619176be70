from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_ACCEPT: _ClassVar[Decision]
    DECISION_REJECT: _ClassVar[Decision]
    DECISION_ABSTAIN: _ClassVar[Decision]

class GrantLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GRANT_LEVEL_UNSPECIFIED: _ClassVar[GrantLevel]
    GRANT_LEVEL_READ: _ClassVar[GrantLevel]
    GRANT_LEVEL_WRITE: _ClassVar[GrantLevel]
    GRANT_LEVEL_MODIFY: _ClassVar[GrantLevel]
DECISION_UNSPECIFIED: Decision
DECISION_ACCEPT: Decision
DECISION_REJECT: Decision
DECISION_ABSTAIN: Decision
GRANT_LEVEL_UNSPECIFIED: GrantLevel
GRANT_LEVEL_READ: GrantLevel
GRANT_LEVEL_WRITE: GrantLevel
GRANT_LEVEL_MODIFY: GrantLevel

class Tx(_message.Message):
    __slots__ = ("body", "public_key", "signature")
    BODY_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    public_key: bytes
    signature: bytes
    def __init__(self, body: _Optional[bytes] = ..., public_key: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class TxBody(_message.Message):
    __slots__ = ("chain_id", "nonce", "memory_submit", "memory_vote", "memory_challenge", "memory_corroborate", "memory_reinstate", "cocommit_submit", "access_grant", "access_revoke", "gov_propose", "gov_vote", "gov_cancel", "domain_private", "domain_keys")
    CHAIN_ID_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SUBMIT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_VOTE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_CORROBORATE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_REINSTATE_FIELD_NUMBER: _ClassVar[int]
    COCOMMIT_SUBMIT_FIELD_NUMBER: _ClassVar[int]
    ACCESS_GRANT_FIELD_NUMBER: _ClassVar[int]
    ACCESS_REVOKE_FIELD_NUMBER: _ClassVar[int]
    GOV_PROPOSE_FIELD_NUMBER: _ClassVar[int]
    GOV_VOTE_FIELD_NUMBER: _ClassVar[int]
    GOV_CANCEL_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_PRIVATE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_KEYS_FIELD_NUMBER: _ClassVar[int]
    chain_id: str
    nonce: int
    memory_submit: MemorySubmit
    memory_vote: MemoryVote
    memory_challenge: MemoryChallenge
    memory_corroborate: MemoryCorroborate
    memory_reinstate: MemoryReinstate
    cocommit_submit: CoCommitSubmit
    access_grant: AccessGrant
    access_revoke: AccessRevoke
    gov_propose: GovPropose
    gov_vote: GovVote
    gov_cancel: GovCancel
    domain_private: DomainPrivate
    domain_keys: DomainKeys
    def __init__(self, chain_id: _Optional[str] = ..., nonce: _Optional[int] = ..., memory_submit: _Optional[_Union[MemorySubmit, _Mapping]] = ..., memory_vote: _Optional[_Union[MemoryVote, _Mapping]] = ..., memory_challenge: _Optional[_Union[MemoryChallenge, _Mapping]] = ..., memory_corroborate: _Optional[_Union[MemoryCorroborate, _Mapping]] = ..., memory_reinstate: _Optional[_Union[MemoryReinstate, _Mapping]] = ..., cocommit_submit: _Optional[_Union[CoCommitSubmit, _Mapping]] = ..., access_grant: _Optional[_Union[AccessGrant, _Mapping]] = ..., access_revoke: _Optional[_Union[AccessRevoke, _Mapping]] = ..., gov_propose: _Optional[_Union[GovPropose, _Mapping]] = ..., gov_vote: _Optional[_Union[GovVote, _Mapping]] = ..., gov_cancel: _Optional[_Union[GovCancel, _Mapping]] = ..., domain_private: _Optional[_Union[DomainPrivate, _Mapping]] = ..., domain_keys: _Optional[_Union[DomainKeys, _Mapping]] = ...) -> None: ...

class MemorySubmit(_message.Message):
    __slots__ = ("memory_id", "domain", "memory_type", "content", "content_hash", "confidence_ppm", "tags", "supersedes", "origin", "epoch")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_PPM_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    domain: str
    memory_type: str
    content: str
    content_hash: bytes
    confidence_ppm: int
    tags: _containers.RepeatedScalarFieldContainer[str]
    supersedes: str
    origin: Origin
    epoch: int
    def __init__(self, memory_id: _Optional[str] = ..., domain: _Optional[str] = ..., memory_type: _Optional[str] = ..., content: _Optional[str] = ..., content_hash: _Optional[bytes] = ..., confidence_ppm: _Optional[int] = ..., tags: _Optional[_Iterable[str]] = ..., supersedes: _Optional[str] = ..., origin: _Optional[_Union[Origin, _Mapping]] = ..., epoch: _Optional[int] = ...) -> None: ...

class Origin(_message.Message):
    __slots__ = ("chain_id", "height", "memory_id", "author")
    CHAIN_ID_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    chain_id: str
    height: int
    memory_id: str
    author: str
    def __init__(self, chain_id: _Optional[str] = ..., height: _Optional[int] = ..., memory_id: _Optional[str] = ..., author: _Optional[str] = ...) -> None: ...

class MemoryVote(_message.Message):
    __slots__ = ("memory_id", "decision", "reason")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    decision: Decision
    reason: str
    def __init__(self, memory_id: _Optional[str] = ..., decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class MemoryChallenge(_message.Message):
    __slots__ = ("memory_id", "reason")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    reason: str
    def __init__(self, memory_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class MemoryCorroborate(_message.Message):
    __slots__ = ("memory_id",)
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    def __init__(self, memory_id: _Optional[str] = ...) -> None: ...

class MemoryReinstate(_message.Message):
    __slots__ = ("memory_id",)
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    def __init__(self, memory_id: _Optional[str] = ...) -> None: ...

class CoCommitCore(_message.Message):
    __slots__ = ("chain_id", "domain", "memory_type", "content", "content_hash", "confidence_ppm", "tags", "coauthors", "agreement_nonce", "not_before_unix_ns", "not_after_unix_ns")
    CHAIN_ID_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_PPM_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    COAUTHORS_FIELD_NUMBER: _ClassVar[int]
    AGREEMENT_NONCE_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    NOT_AFTER_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    chain_id: str
    domain: str
    memory_type: str
    content: str
    content_hash: bytes
    confidence_ppm: int
    tags: _containers.RepeatedScalarFieldContainer[str]
    coauthors: _containers.RepeatedScalarFieldContainer[bytes]
    agreement_nonce: int
    not_before_unix_ns: int
    not_after_unix_ns: int
    def __init__(self, chain_id: _Optional[str] = ..., domain: _Optional[str] = ..., memory_type: _Optional[str] = ..., content: _Optional[str] = ..., content_hash: _Optional[bytes] = ..., confidence_ppm: _Optional[int] = ..., tags: _Optional[_Iterable[str]] = ..., coauthors: _Optional[_Iterable[bytes]] = ..., agreement_nonce: _Optional[int] = ..., not_before_unix_ns: _Optional[int] = ..., not_after_unix_ns: _Optional[int] = ...) -> None: ...

class CoauthorSignature(_message.Message):
    __slots__ = ("public_key", "signature")
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    public_key: bytes
    signature: bytes
    def __init__(self, public_key: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class CoCommitSubmit(_message.Message):
    __slots__ = ("core", "signatures")
    CORE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    core: bytes
    signatures: _containers.RepeatedCompositeFieldContainer[CoauthorSignature]
    def __init__(self, core: _Optional[bytes] = ..., signatures: _Optional[_Iterable[_Union[CoauthorSignature, _Mapping]]] = ...) -> None: ...

class AccessGrant(_message.Message):
    __slots__ = ("domain", "grantee", "level", "expires_height")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    GRANTEE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    domain: str
    grantee: bytes
    level: GrantLevel
    expires_height: int
    def __init__(self, domain: _Optional[str] = ..., grantee: _Optional[bytes] = ..., level: _Optional[_Union[GrantLevel, str]] = ..., expires_height: _Optional[int] = ...) -> None: ...

class AccessRevoke(_message.Message):
    __slots__ = ("domain", "grantee")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    GRANTEE_FIELD_NUMBER: _ClassVar[int]
    domain: str
    grantee: bytes
    def __init__(self, domain: _Optional[str] = ..., grantee: _Optional[bytes] = ...) -> None: ...

class ScopeMember(_message.Message):
    __slots__ = ("public_key", "weight")
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    public_key: bytes
    weight: int
    def __init__(self, public_key: _Optional[bytes] = ..., weight: _Optional[int] = ...) -> None: ...

class ScopeSpec(_message.Message):
    __slots__ = ("scope_id", "domains", "members")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    domains: _containers.RepeatedScalarFieldContainer[str]
    members: _containers.RepeatedCompositeFieldContainer[ScopeMember]
    def __init__(self, scope_id: _Optional[str] = ..., domains: _Optional[_Iterable[str]] = ..., members: _Optional[_Iterable[_Union[ScopeMember, _Mapping]]] = ...) -> None: ...

class ValidatorChange(_message.Message):
    __slots__ = ("public_key", "power")
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    POWER_FIELD_NUMBER: _ClassVar[int]
    public_key: bytes
    power: int
    def __init__(self, public_key: _Optional[bytes] = ..., power: _Optional[int] = ...) -> None: ...

class ParamChange(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class SoftwareUpgrade(_message.Message):
    __slots__ = ("name", "app_version", "activation_height", "binary_sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    APP_VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTIVATION_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    BINARY_SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    app_version: int
    activation_height: int
    binary_sha256: str
    def __init__(self, name: _Optional[str] = ..., app_version: _Optional[int] = ..., activation_height: _Optional[int] = ..., binary_sha256: _Optional[str] = ...) -> None: ...

class GovPropose(_message.Message):
    __slots__ = ("validator", "scope_create", "scope_revise", "scope_pause", "scope_retire", "param", "upgrade", "scope_resume", "upgrade_cancel", "title")
    VALIDATOR_FIELD_NUMBER: _ClassVar[int]
    SCOPE_CREATE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_REVISE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_PAUSE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_RETIRE_FIELD_NUMBER: _ClassVar[int]
    PARAM_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_RESUME_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_CANCEL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    validator: ValidatorChange
    scope_create: ScopeSpec
    scope_revise: ScopeSpec
    scope_pause: str
    scope_retire: str
    param: ParamChange
    upgrade: SoftwareUpgrade
    scope_resume: str
    upgrade_cancel: str
    title: str
    def __init__(self, validator: _Optional[_Union[ValidatorChange, _Mapping]] = ..., scope_create: _Optional[_Union[ScopeSpec, _Mapping]] = ..., scope_revise: _Optional[_Union[ScopeSpec, _Mapping]] = ..., scope_pause: _Optional[str] = ..., scope_retire: _Optional[str] = ..., param: _Optional[_Union[ParamChange, _Mapping]] = ..., upgrade: _Optional[_Union[SoftwareUpgrade, _Mapping]] = ..., scope_resume: _Optional[str] = ..., upgrade_cancel: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

class GovVote(_message.Message):
    __slots__ = ("proposal_id", "decision")
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    proposal_id: str
    decision: Decision
    def __init__(self, proposal_id: _Optional[str] = ..., decision: _Optional[_Union[Decision, str]] = ...) -> None: ...

class GovCancel(_message.Message):
    __slots__ = ("proposal_id",)
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    proposal_id: str
    def __init__(self, proposal_id: _Optional[str] = ...) -> None: ...

class DomainPrivate(_message.Message):
    __slots__ = ("domain", "keys")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    domain: str
    keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    def __init__(self, domain: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ...) -> None: ...

class SealedKey(_message.Message):
    __slots__ = ("recipient", "sealed")
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    recipient: bytes
    sealed: bytes
    def __init__(self, recipient: _Optional[bytes] = ..., sealed: _Optional[bytes] = ...) -> None: ...

class DomainKeys(_message.Message):
    __slots__ = ("domain", "epoch", "keys", "revoke")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    REVOKE_FIELD_NUMBER: _ClassVar[int]
    domain: str
    epoch: int
    keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    revoke: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, domain: _Optional[str] = ..., epoch: _Optional[int] = ..., keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ..., revoke: _Optional[_Iterable[bytes]] = ...) -> None: ...
