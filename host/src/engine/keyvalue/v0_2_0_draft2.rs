//! `wasi:keyvalue@0.2.0-draft2` (store, atomics, batch): the version plugins are built
//! against today, implemented on [`KeyValueView`] over the shared logic of the parent module.

use wasmtime::component::Resource;

use super::bindings::v0_2_0_draft2::wasi::keyvalue::{atomics, batch, store};
use super::{Bucket, Cas, KeyValueView};

impl store::Host for KeyValueView<'_> {
    async fn open(&mut self, identifier: String) -> Result<Resource<Bucket>, store::Error> {
        self.open_bucket(identifier).await
    }
}

impl store::HostBucket for KeyValueView<'_> {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<Option<Vec<u8>>, store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.call().get(&name, &key).await
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.call().set(&name, &key, value).await
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.call().delete(&name, &key).await
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<bool, store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.call().exists(&name, &key).await
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<String>,
    ) -> Result<store::KeyResponse, store::Error> {
        let name = self.bucket_name(&bucket)?;
        let page = self.call().list_keys(&name, cursor.as_deref()).await?;
        Ok(store::KeyResponse {
            keys: page.keys,
            cursor: page.cursor,
        })
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for KeyValueView<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: i64,
    ) -> Result<i64, store::Error> {
        let name = self.bucket_name(&bucket)?;
        self.call().increment(&name, &key, delta, false).await
    }

    async fn swap(&mut self, cas: Resource<Cas>, value: Vec<u8>) -> Result<(), atomics::CasError> {
        let Cas {
            bucket,
            key,
            snapshot,
        } = self.table.delete(cas).map_err(|e| {
            atomics::CasError::StoreError(store::Error::Other(format!("invalid CAS handle: {e}")))
        })?;
        let latest = match self
            .call()
            .swap(&bucket, &key, snapshot, value)
            .await
            .map_err(atomics::CasError::StoreError)?
        {
            None => return Ok(()),
            // Changed since the handle was made: a fresh handle at the latest value, to retry.
            Some(latest) => latest,
        };
        let handle = self
            .table
            .push(Cas {
                bucket,
                key,
                snapshot: latest,
            })
            .map_err(|e| {
                atomics::CasError::StoreError(store::Error::Other(format!(
                    "cannot make another CAS handle: {e}"
                )))
            })?;
        Err(atomics::CasError::CasFailed(handle))
    }
}

impl atomics::HostCas for KeyValueView<'_> {
    async fn new(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<Resource<Cas>, store::Error> {
        let name = self.bucket_name(&bucket)?;
        let snapshot = self.call().get(&name, &key).await?;
        self.table
            .push(Cas {
                bucket: name,
                key,
                snapshot,
            })
            .map_err(|e| store::Error::Other(format!("cannot make another CAS handle: {e}")))
    }

    async fn current(&mut self, cas: Resource<Cas>) -> Result<Option<Vec<u8>>, store::Error> {
        self.table
            .get(&cas)
            .map(|cas| cas.snapshot.clone())
            .map_err(|e| store::Error::Other(format!("invalid CAS handle: {e}")))
    }

    async fn drop(&mut self, cas: Resource<Cas>) -> wasmtime::Result<()> {
        self.table.delete(cas)?;
        Ok(())
    }
}

impl batch::Host for KeyValueView<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<Vec<Option<(String, Vec<u8>)>>, store::Error> {
        self.get_many_values(bucket, keys).await
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Result<(), store::Error> {
        self.set_many_values(bucket, key_values).await
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<(), store::Error> {
        self.delete_many_keys(bucket, keys).await
    }
}
